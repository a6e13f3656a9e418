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
