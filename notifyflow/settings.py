"""NotifyFlow settings: everything comes from environment variables with working defaults.

The embedded default (no env vars) is a SQLite file and kombu's filesystem broker under
``var/``, so ``make run`` works on a machine with no servers. Production and CI set
``DATABASE_URL`` (PostgreSQL) and ``CELERY_BROKER_URL`` (Redis or RabbitMQ).
"""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from dotenv import load_dotenv
from kombu import Queue

from notifyflow.rates import RATE_EXAMPLES, is_rate

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


DEBUG = env_bool("DJANGO_DEBUG", False)
# Only ever accepted with DEBUG on: it is public, in this file.
INSECURE_DEVELOPMENT_KEY = "notifyflow-insecure-development-key"
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "") or (INSECURE_DEVELOPMENT_KEY if DEBUG else "")
if not DEBUG and SECRET_KEY in ("", INSECURE_DEVELOPMENT_KEY):
    raise ImproperlyConfigured(
        "DJANGO_SECRET_KEY must be set to a long random value when DJANGO_DEBUG is off "
        "(`make run` keeps a generated one in var/.env)"
    )
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1" if DEBUG else "")
if not DEBUG and not ALLOWED_HOSTS:
    raise ImproperlyConfigured(
        "DJANGO_ALLOWED_HOSTS must list the host names this site answers to (comma-separated)"
    )
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS")

# HTTPS: DJANGO_HTTPS=1 (behind TLS) switches every setting below on; each can still be
# set on its own. Off by default so `make run` works over plain http on localhost.
_HTTPS = env_bool("DJANGO_HTTPS", False)
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", _HTTPS)
SECURE_HSTS_SECONDS = env_int("DJANGO_SECURE_HSTS_SECONDS", 31_536_000 if _HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", _HTTPS)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_SECURE_HSTS_PRELOAD", _HTTPS)
SESSION_COOKIE_SECURE = env_bool("DJANGO_SESSION_COOKIE_SECURE", _HTTPS)
CSRF_COOKIE_SECURE = env_bool("DJANGO_CSRF_COOKIE_SECURE", _HTTPS)
# Behind a proxy that terminates TLS and sets X-Forwarded-Proto.
if env_bool("DJANGO_SECURE_PROXY_SSL_HEADER", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_HTTPONLY = True
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"

INSTALLED_APPS = [
    # The operator console (every ModelAdmin) comes before django.contrib.admin: its
    # templates override the admin's own (admin/index.html, admin/base_site.html), and
    # the app template loader takes the first app that has a template.
    "console",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "notifyflow.apps.NotifyFlowConfig",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "axes",
    "workflows",
    "recipients",
    "triggers",
    "executions",
    "api",
]

MIDDLEWARE = [
    "notifyflow.logs.RequestIdMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Static files under gunicorn (DEBUG off): served from STATIC_ROOT, hashed names
    # cached forever, gzip/brotli precompressed by collectstatic; from the apps' own
    # directories when collectstatic never ran (notifyflow/staticfiles.py).
    "notifyflow.staticfiles.StaticFilesMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # Before CommonMiddleware: an API path without its trailing slash is served, never
    # redirected (a 301 turns a POST into a GET).
    "notifyflow.api.ApiAppendSlashMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last: turns a login refused by the lockout into the lockout page.
    "axes.middleware.AxesMiddleware",
]

# Admin login throttling (django-axes): after AXES_FAILURE_LIMIT failed logins for one
# username from one address, that pair is locked out for AXES_COOLOFF_MINUTES (0: until
# `manage.py axes_reset`); the login page says so (429). The address is REMOTE_ADDR (no
# header is trusted): behind a reverse proxy every client shares the proxy's address, so
# the lockout becomes per username. A success resets the count.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_ENABLED = env_bool("AXES_ENABLED", True)
AXES_FAILURE_LIMIT = env_int("AXES_FAILURE_LIMIT", 5)
_AXES_COOLOFF_MINUTES = env_float("AXES_COOLOFF_MINUTES", 15)
AXES_COOLOFF_TIME = timedelta(minutes=_AXES_COOLOFF_MINUTES) if _AXES_COOLOFF_MINUTES else None
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "console.lockout.lockout_response"
AXES_COOLOFF_MESSAGE = (
    "Too many failed logins for this username from this address: login is locked for a "
    "while. Try again later, or ask an administrator to run manage.py axes_reset."
)
AXES_PERMALOCK_MESSAGE = (
    "Too many failed logins for this username from this address: login is locked until "
    "an administrator runs manage.py axes_reset."
)

ROOT_URLCONF = "notifyflow.urls"
WSGI_APPLICATION = "notifyflow.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# Persistent connections: with CONN_MAX_AGE=0 every API request and every Celery task
# reconnects, which costs a multiple of the throughput (docs/measurements.md, "Connection
# reuse").
# CONN_HEALTH_CHECKS: a persistent connection is pinged before its first use in each
# request, so the API reconnects by itself after a database restart or failover
# (workers: executions/worker_health.py).
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{VAR_DIR / 'notifyflow.sqlite3'}"),
        conn_max_age=env_int("DB_CONN_MAX_AGE", 600),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # SQLite is the embedded demo default: web, worker and beat share one file.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
IS_POSTGRES = DATABASES["default"]["ENGINE"].startswith("django.db.backends.postgresql")
if IS_POSTGRES:
    # A failed-over address that drops packets fails a reconnect in seconds, not after
    # the kernel's TCP timeout of minutes (libpq connect_timeout).
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault(
        "connect_timeout", env_int("DB_CONNECT_TIMEOUT_S", 5)
    )

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(os.environ.get("NOTIFYFLOW_STATIC_ROOT", VAR_DIR / "static"))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # Hashed and compressed by `manage.py collectstatic` (the Dockerfile runs it); a
    # deploy that skipped it serves the unhashed files and `manage.py check` warns. Once
    # collected, a file missing from the manifest is an error at render time.
    "staticfiles": {"BACKEND": "notifyflow.staticfiles.ManifestOrFindersStorage"},
}

# plain (default, for people) or json (one object per line, for log pipelines); both
# carry the request/task/trigger fields (notifyflow/logs.py).
NOTIFYFLOW_LOG_FORMAT = os.environ.get("NOTIFYFLOW_LOG_FORMAT", "plain").strip().lower() or "plain"
if NOTIFYFLOW_LOG_FORMAT not in ("plain", "json"):
    raise ImproperlyConfigured(
        f"NOTIFYFLOW_LOG_FORMAT={NOTIFYFLOW_LOG_FORMAT!r}: expected 'plain' or 'json'"
    )
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"()": "notifyflow.logs.PlainFormatter"},
        "json": {"()": "notifyflow.logs.JsonFormatter"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": NOTIFYFLOW_LOG_FORMAT}},
    "filters": {
        # The sweeper's three lines every few seconds (beat's "Sending due task", the
        # worker's "received" and "succeeded") at DEBUG; it logs at INFO when it found work.
        "routine_tasks": {"()": "notifyflow.logs.RoutineTaskFilter", "tasks": ["notifyflow.sweep"]}
    },
    "loggers": {
        "notifyflow": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
        # Unexpected errors (500s) with their traceback, whatever DEBUG is.
        "django.request": {"handlers": ["console"], "level": "ERROR", "propagate": False},
        "celery.beat": {"filters": ["routine_tasks"]},
        "celery.worker.strategy": {"filters": ["routine_tasks"]},
        "celery.app.trace": {"filters": ["routine_tasks"]},
    },
}

# --- REST framework -------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["api.auth.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        # Scopes of API keys: each view's required_scope (api/permissions.py).
        "api.permissions.HasScope",
    ],
    "DEFAULT_PARSER_CLASSES": ["notifyflow.parsers.JSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PAGINATION_CLASS": "notifyflow.pagination.ByIdOldestFirst",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "notifyflow.api_errors.exception_handler",
    "DEFAULT_THROTTLE_CLASSES": ["notifyflow.throttling.PerKeyThrottle"],
    "DEFAULT_SCHEMA_CLASS": "notifyflow.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
    # JSON only: no ?format= override (an unknown one answered an undocumented 404).
    "URL_FORMAT_OVERRIDE": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "NotifyFlow API",
    "DESCRIPTION": "Notification workflow backend: triggers, workflows, step logs. A "
    "workflow's `definition` (node types and their config, edges and conditions, "
    "interests, cancel_on) is the `WorkflowDefinition` schema; `POST /api/v1/workflows/` "
    "shows a complete example, and `docs/workflows.md` in the repository explains "
    "templates and their context.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    # The docs pages load Swagger UI and ReDoc from our own static files, never a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SWAGGER_UI_SETTINGS": {"persistAuthorization": True},
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "notifyflow.openapi.document_errors",
    ],
}

# Requests per API key for keys without a rate of their own (DRF rate: "50/s",
# "3000/min"). Empty, the default: only keys given a rate are throttled; one service
# posting hundreds of triggers a second is the ordinary case (notifyflow/throttling.py).
NOTIFYFLOW_THROTTLE_RATE = os.environ.get("NOTIFYFLOW_THROTTLE_RATE", "").strip()
if NOTIFYFLOW_THROTTLE_RATE and not is_rate(NOTIFYFLOW_THROTTLE_RATE):
    raise ImproperlyConfigured(
        f"NOTIFYFLOW_THROTTLE_RATE={NOTIFYFLOW_THROTTLE_RATE!r}: expected requests per "
        f"period, {RATE_EXAMPLES}, or empty (off)"
    )
# An event fans out to at most this many bindings (and no more may be saved).
NOTIFYFLOW_MAX_BINDINGS_PER_EVENT = env_int("NOTIFYFLOW_MAX_BINDINGS_PER_EVENT", 20)

# Requests bigger than this never reach a view: 413 (checked before parsing).
NOTIFYFLOW_MAX_PAYLOAD_BYTES = env_int("NOTIFYFLOW_MAX_PAYLOAD_BYTES", 256 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = NOTIFYFLOW_MAX_PAYLOAD_BYTES + 64 * 1024
# The whole body of POST /api/v1/triggers/bulk/ (up to 1,000 items, each payload within
# NOTIFYFLOW_MAX_PAYLOAD_BYTES); larger: 413 unread.
NOTIFYFLOW_MAX_BULK_BODY_BYTES = env_int("NOTIFYFLOW_MAX_BULK_BODY_BYTES", 16 * 1024 * 1024)

# --- Observability ----------------------------------------------------------------------
# prometheus_client's own variable: a directory shared by every process of a host (web,
# workers, beat); /metrics sums every process's counters found there, so the workers'
# steps show with no setting at all. The default is under VAR_DIR, which every process
# of one installation computes alike; exported, since prometheus_client reads the
# variable itself. Each file is named by host and pid; a worker's start deletes those
# of this host's processes that are gone (notifyflow/metrics.py).
PROMETHEUS_MULTIPROC_DIR = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "").strip() or str(
    VAR_DIR / "prometheus"
)
Path(PROMETHEUS_MULTIPROC_DIR).mkdir(parents=True, exist_ok=True)
os.environ["PROMETHEUS_MULTIPROC_DIR"] = PROMETHEUS_MULTIPROC_DIR
# Unset: /metrics answers loopback clients only. Set: it requires this bearer token.
NOTIFYFLOW_METRICS_TOKEN = os.environ.get("NOTIFYFLOW_METRICS_TOKEN", "")
# /readyz answers 503 when the oldest due instance has waited longer than this (0: never).
NOTIFYFLOW_READYZ_MAX_DUE_AGE_S = env_float("NOTIFYFLOW_READYZ_MAX_DUE_AGE_S", 0)

# --- Templates and definitions (SPEC §10) ----------------------------------------------
# Liquid limits: a template hitting one fails its step permanently, naming the node.
NOTIFYFLOW_TEMPLATE_LOOP_LIMIT = env_int("NOTIFYFLOW_TEMPLATE_LOOP_LIMIT", 10_000)
NOTIFYFLOW_TEMPLATE_OUTPUT_LIMIT = env_int("NOTIFYFLOW_TEMPLATE_OUTPUT_LIMIT", 256 * 1024)
NOTIFYFLOW_TEMPLATE_NAMESPACE_LIMIT = env_int("NOTIFYFLOW_TEMPLATE_NAMESPACE_LIMIT", 256 * 1024)
# Caps checked when a definition is saved.
NOTIFYFLOW_TEMPLATE_MAX_LENGTH = env_int("NOTIFYFLOW_TEMPLATE_MAX_LENGTH", 32 * 1024)
NOTIFYFLOW_DEFINITION_MAX_NODES = env_int("NOTIFYFLOW_DEFINITION_MAX_NODES", 200)
NOTIFYFLOW_DEFINITION_MAX_BYTES = env_int("NOTIFYFLOW_DEFINITION_MAX_BYTES", 256 * 1024)

# --- Personal data (SPEC §10) ----------------------------------------------------------
# Step logs keep the context with a reference to the instance's payload instead of a
# copy of it; on asks for a full snapshot per step.
NOTIFYFLOW_STEP_LOG_FULL_CONTEXT = env_bool("NOTIFYFLOW_STEP_LOG_FULL_CONTEXT", False)
# Payload paths (comma-separated, dotted: "email,user.phone") masked in step logs, the
# API and the admin.
NOTIFYFLOW_REDACT_PATHS = [
    p.strip() for p in os.environ.get("NOTIFYFLOW_REDACT_PATHS", "").split(",") if p.strip()
]
# purge_finished on a beat schedule: finished instances older than this many days are
# deleted daily (0: only when run by hand).
NOTIFYFLOW_PURGE_AFTER_DAYS = env_int("NOTIFYFLOW_PURGE_AFTER_DAYS", 0)

# --- Providers ------------------------------------------------------------------------
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
# Every provider call gives up after this long connecting, and after this long waiting
# for each reply (SMTP: every socket operation; anymail's HTTP ESPs; Twilio; the webhook
# node): a hung provider fails the attempt as transient well inside the step's soft time
# limit, and holds its worker process no longer.
EMAIL_TIMEOUT = env_float("EMAIL_TIMEOUT", 10)
EMAIL_FILE_PATH = os.environ.get("EMAIL_FILE_PATH", str(VAR_DIR / "mail"))
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "notifications@notifyflow.local")
ANYMAIL: dict[str, object] = {"REQUESTS_TIMEOUT": EMAIL_TIMEOUT}

SMS_BACKEND = os.environ.get("SMS_BACKEND", "console")
SMS_FILE_PATH = os.environ.get("SMS_FILE_PATH", str(VAR_DIR / "sms"))
SMS_DEFAULT_FROM = os.environ.get("SMS_DEFAULT_FROM", os.environ.get("TWILIO_FROM_NUMBER", ""))
TWILIO_ACCOUNT_SID = os.environ.get("TWILIO_ACCOUNT_SID", "")
TWILIO_AUTH_TOKEN = os.environ.get("TWILIO_AUTH_TOKEN", "")
# Only for tests and local fakes: where the twilio client sends its HTTP requests.
TWILIO_API_BASE_URL = os.environ.get("TWILIO_API_BASE_URL", "")
TWILIO_TIMEOUT_S = env_float("TWILIO_TIMEOUT_S", 10)
# The console backends print whole messages (tokens, addresses) into the log: refused in
# production unless explicitly allowed (`make run` allows them).
NOTIFYFLOW_ALLOW_CONSOLE_BACKENDS = env_bool("NOTIFYFLOW_ALLOW_CONSOLE_BACKENDS", False)
if not (DEBUG or NOTIFYFLOW_ALLOW_CONSOLE_BACKENDS) and (
    EMAIL_BACKEND == "django.core.mail.backends.console.EmailBackend"
    or SMS_BACKEND in ("console", "executions.providers.sms.ConsoleSmsBackend")
):
    raise ImproperlyConfigured(
        "the console email/SMS backends print messages into the log: with DJANGO_DEBUG off "
        "set EMAIL_BACKEND and SMS_BACKEND, or NOTIFYFLOW_ALLOW_CONSOLE_BACKENDS=1"
    )


# --- Delivery (SPEC §11) ----------------------------------------------------------------
def _env_providers(name: str) -> list:
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


NOTIFYFLOW_EMAIL_BACKENDS = _env_providers("NOTIFYFLOW_EMAIL_BACKENDS")
NOTIFYFLOW_SMS_BACKENDS = _env_providers("NOTIFYFLOW_SMS_BACKENDS")
# Circuit breaker per provider and process: after N transient failures in a row the
# provider is skipped for OPEN_S seconds. 0 turns it off.
NOTIFYFLOW_CIRCUIT_FAILURES = env_int("NOTIFYFLOW_CIRCUIT_FAILURES", 0)
NOTIFYFLOW_CIRCUIT_OPEN_S = env_float("NOTIFYFLOW_CIRCUIT_OPEN_S", 60)
# Send slots per channel in each worker (executions/channel_slots.py): the sends of one
# channel may hold at most this many of the worker's processes at once (0: all but one),
# so a hung provider leaves the other channels a process. A step that finds no free slot
# within SLOT_WAIT_S sends nothing and runs again BUSY_RETRY_S later (no attempt counted).
NOTIFYFLOW_CHANNEL_SLOTS = env_int("NOTIFYFLOW_CHANNEL_SLOTS", 0)
NOTIFYFLOW_CHANNEL_SLOT_WAIT_S = env_float("NOTIFYFLOW_CHANNEL_SLOT_WAIT_S", 0.5)
NOTIFYFLOW_CHANNEL_BUSY_RETRY_S = env_float("NOTIFYFLOW_CHANNEL_BUSY_RETRY_S", 5)
# Given to Twilio as each message's StatusCallback (the public URL of
# /webhooks/twilio/status/); empty: Twilio sends no status callbacks.
NOTIFYFLOW_TWILIO_STATUS_CALLBACK_URL = os.environ.get("NOTIFYFLOW_TWILIO_STATUS_CALLBACK_URL", "")
# anymail's tracking webhooks (/webhooks/anymail/<esp>/tracking/): basic auth "user:pass".
if os.environ.get("ANYMAIL_WEBHOOK_SECRET"):
    ANYMAIL["WEBHOOK_SECRET"] = os.environ["ANYMAIL_WEBHOOK_SECRET"]
if os.environ.get("MAILGUN_WEBHOOK_SIGNING_KEY"):
    ANYMAIL["MAILGUN_WEBHOOK_SIGNING_KEY"] = os.environ["MAILGUN_WEBHOOK_SIGNING_KEY"]
# webhook node: the only hosts it may call (checked at save and at send), the HMAC key
# of its X-NotifyFlow-Signature header, its timeout.
NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS = [
    h.strip().lower()
    for h in os.environ.get("NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS", "").split(",")
    if h.strip()
]
NOTIFYFLOW_WEBHOOK_SECRET = os.environ.get("NOTIFYFLOW_WEBHOOK_SECRET", "")
NOTIFYFLOW_WEBHOOK_TIMEOUT_S = env_float("NOTIFYFLOW_WEBHOOK_TIMEOUT_S", 10)
# Where recipients reach this installation: the one-click unsubscribe links of emails
# (``{NOTIFYFLOW_PUBLIC_URL}/u/{token}/``, SPEC §12). Required once recipients exist and
# an active, non-critical workflow has an email node (system check notifyflow.E010).
NOTIFYFLOW_PUBLIC_URL = os.environ.get("NOTIFYFLOW_PUBLIC_URL", "").strip().rstrip("/")

# --- Engine ---------------------------------------------------------------------------
NOTIFYFLOW_RETRY_BASE_DELAY_S = env_float("NOTIFYFLOW_RETRY_BASE_DELAY_S", 60)
NOTIFYFLOW_MAX_RETRIES = env_int("NOTIFYFLOW_MAX_RETRIES", 3)
# Order matters: soft limit < hard limit < lease < broker visibility timeout.
NOTIFYFLOW_STEP_SOFT_TIME_LIMIT_S = env_int("NOTIFYFLOW_STEP_SOFT_TIME_LIMIT_S", 30)
NOTIFYFLOW_STEP_TIME_LIMIT_S = env_int("NOTIFYFLOW_STEP_TIME_LIMIT_S", 45)
NOTIFYFLOW_LEASE_S = env_int("NOTIFYFLOW_LEASE_S", 90)
NOTIFYFLOW_SWEEP_INTERVAL_S = env_float("NOTIFYFLOW_SWEEP_INTERVAL_S", 5)
NOTIFYFLOW_SWEEP_BATCH = env_int("NOTIFYFLOW_SWEEP_BATCH", 500)
# List fan-out jobs (triggers/fanout.py): a job holds its lease this long past each
# batch (the sweeper resumes it after that when its worker died), and runs for at most
# this long before sending itself again (under the task time limits).
NOTIFYFLOW_FANOUT_LEASE_S = env_int("NOTIFYFLOW_FANOUT_LEASE_S", 60)
NOTIFYFLOW_FANOUT_SLICE_S = env_float("NOTIFYFLOW_FANOUT_SLICE_S", 20)
# Instances per INSERT of a fan-out (one transaction each, with its progress).
NOTIFYFLOW_FANOUT_BATCH = env_int("NOTIFYFLOW_FANOUT_BATCH", 2000)
# A due instance with no claim after this long is assumed to have lost its message.
NOTIFYFLOW_REDISPATCH_AFTER_S = env_float("NOTIFYFLOW_REDISPATCH_AFTER_S", 30)
# Delays longer than this never go to the broker as a countdown; the sweeper wakes them.
# A worker holds a countdown's message unacked until it is due: on RabbitMQ this must stay
# well under the server's consumer_timeout (30 min by default), which closes the channel.
NOTIFYFLOW_BROKER_HORIZON_S = env_int("NOTIFYFLOW_BROKER_HORIZON_S", 600)
# Redis re-delivers an unacked message after this; it must exceed every countdown we
# hand the broker and every task's runtime (kombu#337, celery#2599).
NOTIFYFLOW_VISIBILITY_TIMEOUT_S = env_int("NOTIFYFLOW_VISIBILITY_TIMEOUT_S", 3600)

# Worker event loop: fire all due ETA timers without a 1 s poll between batches of 10
# (notifyflow/broker/kombu_patches.py). Off only to measure stock kombu.
NOTIFYFLOW_KOMBU_TIMER_FIX = env_bool("NOTIFYFLOW_KOMBU_TIMER_FIX", True)

# Workers commit asynchronously except for a step's outcome (executions/worker_hooks.py):
# one fsync per step instead of three.
NOTIFYFLOW_WORKER_ASYNC_COMMIT = env_bool("NOTIFYFLOW_WORKER_ASYNC_COMMIT", True)

# --- Cache (throttling) ------------------------------------------------------------------
# Shared by every web process: NOTIFYFLOW_CACHE_URL (a Redis URL), else the Redis broker's
# server, else (RabbitMQ, the embedded default) per-process memory.
_CACHE_URL = os.environ.get("NOTIFYFLOW_CACHE_URL", "") or (
    os.environ.get("CELERY_BROKER_URL", "")
    if broker_kind(os.environ.get("CELERY_BROKER_URL", "")) == "redis"
    else ""
)
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": _CACHE_URL,
        # A Redis that is down must not hold API requests: the throttle then lets them
        # through (notifyflow/throttling.py) after at most this long.
        "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
    }
    if _CACHE_URL
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
}

# The engine's hot statements (claim, delivery marker, outcome) run as server-side
# prepared statements on PostgreSQL (notifyflow/db.py). Off behind a transaction-mode
# pooler that cannot keep prepared statements.
NOTIFYFLOW_DB_PREPARE = env_bool("NOTIFYFLOW_DB_PREPARE", True)

# --- Celery ---------------------------------------------------------------------------
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "filesystem://")
# redis (production default), amqp (RabbitMQ, supported), or an embedded one (filesystem,
# memory): README "Brokers" says what each gives.
NOTIFYFLOW_BROKER_KIND = broker_kind(CELERY_BROKER_URL)
CELERY_BROKER_FILESYSTEM_DIR = VAR_DIR / "broker"
if CELERY_BROKER_URL.startswith("filesystem://"):
    for _sub in ("queue", "processed", "control"):
        (CELERY_BROKER_FILESYSTEM_DIR / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(CELERY_BROKER_FILESYSTEM_DIR / "queue"),
        "data_folder_out": str(CELERY_BROKER_FILESYSTEM_DIR / "queue"),
        "processed_folder": str(CELERY_BROKER_FILESYSTEM_DIR / "processed"),
        "control_folder": str(CELERY_BROKER_FILESYSTEM_DIR / "control"),
        "store_processed": False,
    }
elif NOTIFYFLOW_BROKER_KIND == "amqp":
    # RabbitMQ's own acknowledgement of every publish: a publish the broker did not take
    # (restart, resource alarm) raises, so the caller's "left for the sweeper" path
    # applies instead of a message lost in a socket buffer. Unacked messages come back
    # when their consumer's connection closes: no visibility timeout here.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"confirm_publish": True}
else:
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": NOTIFYFLOW_VISIBILITY_TIMEOUT_S,
        # A Redis that restarts closes its sockets and every process reconnects at once;
        # these bound the cases where it vanishes without closing them (failover, NAT):
        # a connect or a publish never hangs, and an idle socket is probed.
        "socket_connect_timeout": 5,
        "socket_timeout": 30,
        "socket_keepalive": True,
    }
# kombu's Redis transport, minus a new client object per published message
# (notifyflow/broker/kombu_patches.py).
if CELERY_BROKER_URL.startswith("redis://"):
    CELERY_BROKER_TRANSPORT = "notifyflow.broker.kombu_patches:Transport"
# Publishing (notifyflow/broker/publish.py): on, send_task's per-call routing and queue
# declare are done once per task, and on Redis the envelope kombu would write is pushed
# straight onto the queue's list, a batch in one round trip; off, every message goes
# through Celery's own send_task and kombu's producer (to rule the mirror out).
NOTIFYFLOW_FAST_PUBLISH = env_bool("NOTIFYFLOW_FAST_PUBLISH", True)
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# At-least-once: a message is acked after the task ran; a worker that dies mid-task gets
# its message redelivered. The database attempts counter bounds the redeliveries.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Two queues, both consumed by a plain `celery -A notifyflow worker`: the default one
# (steps) and `notifyflow.bulk` (list fan-out jobs), so a 100,000-member fan-out's job is
# not one more message in the steps' line.
CELERY_TASK_DEFAULT_QUEUE = "celery"
# Each queue bound by its own name: on RabbitMQ two queues sharing the default routing
# key would each get a copy of every message.
CELERY_TASK_QUEUES = (
    Queue("celery", routing_key="celery"),
    Queue("notifyflow.bulk", routing_key="notifyflow.bulk"),
)
CELERY_TASK_ROUTES = {"notifyflow.fanout_run": {"queue": "notifyflow.bulk"}}
# Time limits hold only in the prefork pool (solo and threads ignore them): every
# worker command we document and `make run` use prefork.
CELERY_TASK_SOFT_TIME_LIMIT = NOTIFYFLOW_STEP_SOFT_TIME_LIMIT_S
CELERY_TASK_TIME_LIMIT = NOTIFYFLOW_STEP_TIME_LIMIT_S
# A prefork child whose resident memory grows past this (KiB) is replaced after its task.
NOTIFYFLOW_WORKER_MAX_MEMORY_KB = env_int("NOTIFYFLOW_WORKER_MAX_MEMORY_KB", 512 * 1024)
CELERY_WORKER_MAX_MEMORY_PER_CHILD = NOTIFYFLOW_WORKER_MAX_MEMORY_KB
# When a worker loses Redis (restart, failover), let the steps it is running finish: the
# database records their outcome whatever the broker does, and their messages, no
# longer ackable, come back after the visibility timeout as harmless no-ops. Celery's
# alternative (True, its future default) kills them mid-step, which means a lease to
# wait out and, after a send, a duplicate message. (Celery warns at each connection
# loss that the default will change; the choice is deliberate.)
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Workers run without Celery's Gossip step (unused here; it logged a traceback on every
# broker connection loss): notifyflow/broker/consumer.py. 1: Celery's own consumer.
CELERY_WORKER_CONSUMER = (
    "celery.worker.consumer:Consumer"
    if env_bool("NOTIFYFLOW_WORKER_GOSSIP", False)
    else "notifyflow.broker.consumer:Consumer"
)
# Workers and beat reconnect to a restarted broker (Celery's default, stated): up to 100
# tries, 2 s apart growing to 30 s, about 50 minutes before a worker gives up and exits.
CELERY_BROKER_CONNECTION_RETRY = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = 100
# A publish (API after commit, worker after a step, beat) rides out a broker restart of a
# few seconds: 5 tries over ~3 s. After that enqueue_on_commit leaves the instance to
# the sweeper, so a request never waits longer than this on a dead broker.
CELERY_TASK_PUBLISH_RETRY = True
CELERY_TASK_PUBLISH_RETRY_POLICY = {
    "max_retries": 4,
    "interval_start": 0,
    "interval_step": 0.5,
    "interval_max": 2,
}
CELERY_TIMEZONE = "UTC"
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TASK_ALWAYS_EAGER = False

if not (
    NOTIFYFLOW_STEP_SOFT_TIME_LIMIT_S
    < NOTIFYFLOW_STEP_TIME_LIMIT_S
    < NOTIFYFLOW_LEASE_S
    < NOTIFYFLOW_VISIBILITY_TIMEOUT_S
):
    raise ImproperlyConfigured(
        "need NOTIFYFLOW_STEP_SOFT_TIME_LIMIT_S < NOTIFYFLOW_STEP_TIME_LIMIT_S < "
        "NOTIFYFLOW_LEASE_S < NOTIFYFLOW_VISIBILITY_TIMEOUT_S"
    )
if not NOTIFYFLOW_BROKER_HORIZON_S < NOTIFYFLOW_VISIBILITY_TIMEOUT_S / 2:
    # Countdowns near the visibility timeout get redelivered (kombu#337).
    raise ImproperlyConfigured(
        "need NOTIFYFLOW_BROKER_HORIZON_S < NOTIFYFLOW_VISIBILITY_TIMEOUT_S / 2"
    )
