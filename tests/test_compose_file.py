from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


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
    assert {"postgres", "redis", "web", "worker", "beat"} <= set(services)


def test_worker_stop_grace_period_exceeds_the_hard_time_limit():
    """docker stop waits this long after SIGTERM before SIGKILL: a warm shutdown must be
    able to finish a step that runs to its hard time limit."""
    import yaml
    from django.conf import settings

    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    grace = compose["services"]["worker"]["stop_grace_period"]
    assert grace.endswith("s")
    assert int(grace[:-1]) > settings.NOTIFYFLOW_STEP_TIME_LIMIT_S
