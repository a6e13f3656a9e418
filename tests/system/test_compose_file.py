from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# One worker per group of priority lanes (docs/operations.md "Priority lanes").
WORKERS = ("worker-urgent", "worker-bulk")


def _compose() -> list[str] | None:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if (
        shutil.which("docker")
        and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0
    ):
        return ["docker", "compose"]
    return None


@pytest.mark.skipif(_compose() is None, reason="neither docker-compose nor docker compose")
def test_compose_file_parses_with_every_process():
    command = _compose()
    check = subprocess.run(
        [*command, "-f", str(ROOT / "docker-compose.yml"), "config", "-q"],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stderr
    services = subprocess.run(
        [*command, "-f", str(ROOT / "docker-compose.yml"), "config", "--services"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert {"postgres", "redis", "web", *WORKERS, "beat"} <= set(services)


def test_worker_stop_grace_period_exceeds_the_hard_time_limit():
    """docker stop waits this long after SIGTERM before SIGKILL: a warm shutdown must be
    able to finish a step that runs to its hard time limit."""
    import yaml
    from django.conf import settings

    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    for name in WORKERS:
        grace = compose["services"][name]["stop_grace_period"]
        assert grace.endswith("s")
        assert int(grace[:-1]) > settings.NOTIFYFLOW_STEP_TIME_LIMIT_S


def _compose_file() -> dict:
    import yaml

    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


APP_SERVICES = ("migrate", "web", *WORKERS, "beat")


def test_one_image_built_once_runs_every_process():
    services = _compose_file()["services"]
    images = {services[name]["image"] for name in APP_SERVICES}
    assert len(images) == 1, images
    built = [name for name in services if "build" in services[name]]
    assert built == ["migrate"], built
    # The others use the image migrate built (and which they wait for), never a registry's.
    assert all(services[name]["pull_policy"] == "never" for name in APP_SERVICES[1:])
    for name in APP_SERVICES[1:]:
        assert services[name]["depends_on"]["migrate"]["condition"] == (
            "service_completed_successfully"
        )


def test_the_lane_workers_consume_every_queue_between_them_urgent_ones_apart(settings):
    """Every queue has a worker (the sweeper's messages and fan-out jobs too), and the
    urgent lanes' worker takes nothing else."""
    services = _compose_file()["services"]
    queues = {}
    for name in WORKERS:
        command = services[name]["command"]
        assert command[:4] == ["celery", "-A", "notifyflow", "worker"], command
        assert command[command.index("-P") + 1] == "prefork"
        queues[name] = command[command.index("-Q") + 1].split(",")
    assert queues["worker-urgent"] == ["notifyflow.critical", "notifyflow.high"]
    every = [queue.name for queue in settings.CELERY_TASK_QUEUES]
    assert sorted(q for names in queues.values() for q in names) == sorted(every)
    # The -Q lists are in CELERY_TASK_QUEUES order: on Redis, the order a worker takes them.
    for names in queues.values():
        assert names == sorted(names, key=every.index), shlex.join(names)


def _dockerfile() -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    text = (ROOT / "Dockerfile").read_text()
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    return [i.strip() for i in "\n".join(lines).replace("\\\n", " ").splitlines() if i.strip()]


def test_the_image_runs_as_a_non_root_user_with_static_files_collected_at_build():
    instructions = _dockerfile()
    users = [i.split()[1] for i in instructions if i.startswith("USER ")]
    assert users and users[-1] not in ("root", "0"), users
    last_user = max(n for n, i in enumerate(instructions) if i.startswith("USER "))
    collect = [n for n, i in enumerate(instructions) if "manage.py collectstatic" in i]
    assert collect and collect[0] < last_user and instructions[collect[0]].startswith("RUN ")
    # The only place the processes write is var/ (owned by that user).
    assert any("chown" in i and "/app/var" in i for i in instructions)


def test_dockerignore_keeps_the_hosts_state_and_secrets_out_of_the_image():
    import fnmatch

    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]

    def ignored(path: str) -> bool:
        parts = path.split("/")
        prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
        return any(
            fnmatch.fnmatch(prefix, pattern.removeprefix("**/"))
            or fnmatch.fnmatch(parts[-1], pattern.removeprefix("**/"))
            for pattern in patterns
            for prefix in prefixes
        )

    for path in (
        ".venv/bin/python",
        ".git/config",
        "var/dev-secret-key",
        "var/.env",
        "var/notifyflow.sqlite3",
        "notifyflow.sqlite3",
        "notifyflow/__pycache__/settings.cpython-311.pyc",
        ".env",
    ):
        assert ignored(path), path
    for path in ("manage.py", "pyproject.toml", "README.md", "notifyflow/settings.py"):
        assert not ignored(path), path


def test_web_worker_and_beat_share_the_metrics_directory():
    services = _compose_file()["services"]
    instructions = _dockerfile()
    var_dir = next(
        part.split("=", 1)[1]
        for i in instructions
        if i.startswith("ENV ")
        for part in i.split()
        if part.startswith("NOTIFYFLOW_VAR_DIR=")
    )
    mounts = {name: services[name].get("volumes", []) for name in APP_SERVICES[1:]}
    for name, volumes in mounts.items():
        assert f"metrics:{var_dir}/prometheus" in volumes, (name, volumes)


@pytest.mark.django_db
def test_the_documented_prometheus_target_is_answered_by_the_compose_web(settings):
    """The scrape job docs/operations.md documents, against the settings compose gives web:
    its host is allowed, and its token opens /metrics to a non-loopback client."""
    import re

    import yaml
    from django.test import Client

    doc = (ROOT / "docs" / "operations.md").read_text()
    block = re.search(r"```yaml\n(scrape_configs:.*?)```", doc, re.S)
    assert block, "docs/operations.md: no scrape_configs example"
    job = yaml.safe_load(block.group(1))["scrape_configs"][0]
    (target,) = job["static_configs"][0]["targets"]
    host, port = target.split(":")
    web = _compose_file()["services"]["web"]
    env = web["environment"]
    assert any(p.split(":")[-1] == port for p in web["ports"]), web["ports"]
    settings.ALLOWED_HOSTS = env["DJANGO_ALLOWED_HOSTS"].split(",")
    token = re.sub(r"\$\{[A-Z_]+:-(.*)\}", r"\1", env["NOTIFYFLOW_METRICS_TOKEN"])
    settings.NOTIFYFLOW_METRICS_TOKEN = token
    assert job["authorization"]["type"] == "Bearer"
    prometheus = Client(REMOTE_ADDR="172.18.0.5", HTTP_HOST=target)
    response = prometheus.get(job["metrics_path"], HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200, response.content[:300]
    assert b"notifyflow_due_backlog" in response.content
    assert prometheus.get(job["metrics_path"]).status_code == 401
