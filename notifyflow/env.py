"""Where this installation keeps its files, and reading typed settings from the
environment: every process of a checkout (manage.py, celery, gunicorn) loads the same
``var/.env`` before any setting is read."""

from __future__ import annotations

import json
import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured
from dotenv import load_dotenv

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("NOTIFYFLOW_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)

# `make run` writes var/.env (its generated secret key, allowed hosts, console backends,
# database and broker URLs, the demo API key), so every process of this checkout -
# manage.py in a plain shell, celery, gunicorn - starts with the same settings. It only
# fills in variables the environment does not set. A production host has no such file;
# NOTIFYFLOW_ENV_FILE names another one, or none when empty.
ENV_FILE = os.environ.get("NOTIFYFLOW_ENV_FILE", str(VAR_DIR / ".env")).strip()
if ENV_FILE:
    load_dotenv(ENV_FILE, override=False)

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def env_bool(name: str, default: bool) -> bool:
    """A boolean variable; anything but the usual spellings is an error (a typo must not
    silently switch a feature off)."""
    value = os.environ.get(name, "").strip().lower()
    if not value:
        return default
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(
        f"{name}={os.environ[name]!r}: expected one of {sorted(_TRUE | _FALSE)}"
    )


def _env_number(name: str, default: float, kind: type) -> float:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        return kind(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r}: expected {kind.__name__}") from None


def env_int(name: str, default: int) -> int:
    return int(_env_number(name, default, int))


def env_float(name: str, default: float) -> float:
    return float(_env_number(name, default, float))


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def broker_kind(url: str) -> str:
    """ "redis", "amqp" (RabbitMQ) or the URL's scheme (filesystem, memory, ...)."""
    scheme = url.partition("://")[0].lower()
    if scheme in ("redis", "rediss"):
        return "redis"
    if scheme in ("amqp", "amqps", "pyamqp"):
        return "amqp"
    return scheme


def env_providers(name: str) -> list:
    """Ordered providers: comma-separated backend paths/names, or a JSON list of
    ``{"name", "backend", "options"}``. Empty: the channel's single default backend."""
    value = os.environ.get(name, "").strip()
    if not value:
        return []
    if value.startswith("["):
        try:
            parsed = json.loads(value)
        except ValueError as exc:
            raise ImproperlyConfigured(f"{name}: invalid JSON: {exc}") from None
        if not isinstance(parsed, list) or not all(
            isinstance(e, str) or (isinstance(e, dict) and isinstance(e.get("backend"), str))
            for e in parsed
        ):
            raise ImproperlyConfigured(f"{name}: expected a list of paths or {{backend, ...}}")
        return parsed
    return [part.strip() for part in value.split(",") if part.strip()]
