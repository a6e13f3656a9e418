"""`make run` (scripts/run.sh), as a newcomer uses it (issue 23): every manage.py command
works in a plain shell afterwards (the settings read the var/.env it writes), and a
second start reuses the demo API key and prints a curl that creates a new instance."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from dotenv import dotenv_values

from triggers.models import ApiKey
from triggers.services import api_key_revoke

ROOT = Path(__file__).resolve().parents[2]
# What a newcomer's shell has: none of the settings' variables.
SETTINGS_PREFIXES = ("DJANGO_", "EMAIL_", "SMS_", "NOTIFYFLOW_", "PROMETHEUS_", "TWILIO_")
SETTINGS_NAMES = ("DATABASE_URL", "CELERY_BROKER_URL")


def plain_shell(var_dir: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(SETTINGS_PREFIXES) and k not in SETTINGS_NAMES
    }
    return {**env, "NOTIFYFLOW_VAR_DIR": str(var_dir), "PY": sys.executable, **extra}


def run_setup(var_dir: Path) -> tuple[str, str]:
    """scripts/run.sh without starting the processes; the printed key and idempotency key."""
    result = subprocess.run(
        ["bash", "scripts/run.sh", "--setup-only"],
        cwd=ROOT,
        env=plain_shell(var_dir),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    key = re.search(r"Bearer (nf_\S+)\"", result.stdout)
    idempotency = re.search(r'"idempotency_key": "([^"]+)"', result.stdout)
    assert key and idempotency, result.stdout
    return key.group(1), idempotency.group(1)


def api_keys_in(var_dir: Path) -> int:
    with sqlite3.connect(var_dir / "notifyflow.sqlite3") as db:
        return db.execute("SELECT count(*) FROM triggers_apikey").fetchone()[0]


def test_after_make_run_manage_py_works_in_a_plain_shell_and_a_restart_reuses_the_key(
    tmp_path,
):
    first_key, first_demo = run_setup(tmp_path)
    env_file = dotenv_values(tmp_path / ".env")
    assert env_file["NOTIFYFLOW_DEMO_API_KEY"] == first_key
    assert (tmp_path / ".env").stat().st_mode & 0o077 == 0  # holds a secret

    for command in (
        ["createsuperuser", "--noinput", "--username", "ada", "--email", "ada@example.com"],
        ["check"],
        ["showmigrations", "triggers"],
    ):
        result = subprocess.run(
            [sys.executable, "manage.py", *command],
            cwd=ROOT,
            env=plain_shell(tmp_path, DJANGO_SUPERUSER_PASSWORD="a-long-passphrase-9"),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, (command, result.stderr)

    second_key, second_demo = run_setup(tmp_path)
    assert second_key == first_key
    assert api_keys_in(tmp_path) == 1
    assert second_demo != first_demo  # the printed curl creates an instance, not a replay


@pytest.mark.django_db
def test_demo_api_key_is_created_once_kept_and_replaced_when_revoked(tmp_path, capsys):
    env_file = tmp_path / ".env"
    env_file.write_text("DJANGO_ALLOWED_HOSTS='localhost'\n")

    def demo_key() -> str:
        call_command("demo_api_key", "--env-file", str(env_file))
        return capsys.readouterr().out.strip().splitlines()[-1]

    first = demo_key()
    assert demo_key() == first
    assert ApiKey.objects.count() == 1
    saved = dotenv_values(env_file)
    assert saved == {"DJANGO_ALLOWED_HOSTS": "localhost", "NOTIFYFLOW_DEMO_API_KEY": first}

    api_key_revoke(api_key=ApiKey.objects.get())
    replaced = demo_key()
    assert replaced != first
    assert dotenv_values(env_file)["NOTIFYFLOW_DEMO_API_KEY"] == replaced
    assert ApiKey.objects.filter(revoked_at__isnull=True).count() == 1
