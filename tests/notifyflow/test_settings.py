"""Deploy defaults (issue 12 item 7): no default SECRET_KEY or empty ALLOWED_HOSTS in
production, `check --deploy` clean with production env, full password validators."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = {
    "DJANGO_SECRET_KEY": "a-long-random-production-secret-0123456789abcdef-0123456789",
    "DJANGO_ALLOWED_HOSTS": "notify.example.com",
    "DJANGO_HTTPS": "1",
    "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend",
    "SMS_BACKEND": "twilio",
}


def _manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "EMAIL_", "SMS_"))}
    base.pop("NOTIFYFLOW_ALLOW_CONSOLE_BACKENDS", None)
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**base, "DJANGO_SETTINGS_MODULE": "notifyflow.settings", **env},
        capture_output=True,
        text=True,
    )


def test_production_refuses_the_default_or_a_missing_secret_key():
    for secret in ("", "notifyflow-insecure-development-key"):
        result = _manage("check", env={**PRODUCTION, "DJANGO_SECRET_KEY": secret})
        assert result.returncode != 0 and "DJANGO_SECRET_KEY" in result.stderr


def test_production_requires_allowed_hosts():
    result = _manage("check", env={**PRODUCTION, "DJANGO_ALLOWED_HOSTS": ""})
    assert result.returncode != 0 and "DJANGO_ALLOWED_HOSTS" in result.stderr


def test_debug_runs_with_the_development_defaults():
    result = _manage("check", env={"DJANGO_DEBUG": "1"})
    assert result.returncode == 0, result.stderr


def test_check_deploy_is_clean_with_production_env():
    result = _manage("check", "--deploy", env=PRODUCTION)
    assert result.returncode == 0, result.stdout + result.stderr
    issues = [
        line
        for line in (result.stdout + result.stderr).splitlines()
        if line.startswith("?:") or ": (" in line
    ]
    # drf-spectacular reports its schema warnings through the check framework (the
    # bearer scheme, operation ids): the OpenAPI schema is issue 15's; they join this
    # assertion once it lands. Every Django security check must be silent.
    # notifyflow.W001 (static files not collected) is about the release step this test
    # does not run (tests/notifyflow/test_staticfiles.py). notifyflow.W020/W021 are about
    # the PostgreSQL server DATABASE_URL names, not this environment
    # (tests/triggers/test_checks.py).
    about_elsewhere = ("drf_spectacular.", "notifyflow.W001", "notifyflow.W020", "notifyflow.W021")
    assert [line for line in issues if not any(name in line for name in about_elsewhere)] == []


def test_full_password_validators():
    names = {v["NAME"].rsplit(".", 1)[-1] for v in settings.AUTH_PASSWORD_VALIDATORS}
    assert names == {
        "UserAttributeSimilarityValidator",
        "MinimumLengthValidator",
        "CommonPasswordValidator",
        "NumericPasswordValidator",
    }


def test_make_run_provides_a_secret_hosts_and_allows_console_backends():
    script = (ROOT / "scripts/run.sh").read_text()
    assert "DJANGO_SECRET_KEY" in script and "DJANGO_ALLOWED_HOSTS" in script
    assert "NOTIFYFLOW_ALLOW_CONSOLE_BACKENDS" in script
