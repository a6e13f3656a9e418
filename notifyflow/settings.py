"""NotifyFlow settings: everything comes from environment variables with working defaults.

The embedded default (no env vars) is a SQLite file and kombu's filesystem broker under
``var/``, so ``make run`` works on a machine with no servers. Production and CI set
``DATABASE_URL`` (PostgreSQL) and ``CELERY_BROKER_URL`` (Redis or RabbitMQ).
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from notifyflow.env import (
    BASE_DIR,
    ENV_FILE,  # noqa: F401 - a setting: demo_api_key keeps the demo's key there
    VAR_DIR,
    broker_kind,
    env_bool,
    env_float,
    env_int,
    env_list,
)
from notifyflow.rates import RATE_EXAMPLES, is_rate

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
    "api_keys",
    "translations",
    "workflows",
    "status_webhooks",
    "recipients",
    "triggers",
    "gates",
    "feed",
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
    "api.base.ApiAppendSlashMiddleware",
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
    # "SQLite does not support indexes with non-key columns": the covering index of the
    # due-instance query (triggers.TriggerInstance) is a PostgreSQL refinement; on the
    # demo default the plain index serves, and every manage.py command would say so.
    SILENCED_SYSTEM_CHECKS = ["models.W040"]
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
        # The same for the status webhook deliverer's passes: it logs each attempt itself.
        "routine_tasks": {
            "()": "notifyflow.logs.RoutineTaskFilter",
            "tasks": ["notifyflow.sweep", "notifyflow.deliver_status_webhooks"],
        }
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
    "DEFAULT_AUTHENTICATION_CLASSES": ["api_keys.authentication.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        # Scopes of API keys: each view's required_scope (api/permissions.py).
        "api.permissions.HasScope",
    ],
    "DEFAULT_PARSER_CLASSES": ["api.parsers.JSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PAGINATION_CLASS": "api.pagination.ByIdOldestFirst",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "api.errors.exception_handler",
    "DEFAULT_THROTTLE_CLASSES": ["notifyflow.throttling.PerKeyThrottle"],
    "DEFAULT_SCHEMA_CLASS": "api.schema.AutoSchema",
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
        "api.schema.document_errors",
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
# Requests per recipient on the in-app feed's endpoints (recipient tokens, any number of
# tabs): a page polling counts/ every few seconds stays far below it. Empty: off.
NOTIFYFLOW_FEED_RATE = os.environ.get("NOTIFYFLOW_FEED_RATE", "120/min").strip()
if NOTIFYFLOW_FEED_RATE and not is_rate(NOTIFYFLOW_FEED_RATE):
    raise ImproperlyConfigured(
        f"NOTIFYFLOW_FEED_RATE={NOTIFYFLOW_FEED_RATE!r}: expected requests per period, "
        f"{RATE_EXAMPLES}, or empty (off)"
    )
# An event fans out to at most this many bindings (and no more may be saved).
NOTIFYFLOW_MAX_BINDINGS_PER_EVENT = env_int("NOTIFYFLOW_MAX_BINDINGS_PER_EVENT", 20)

# Body limits (docs/api.md#limits): every API endpoint has one, checked on the declared
# size before the body is read; above it, 413 payload_too_large naming it.
# A payload (a trigger's, an event's context, ...): 413 past it.
NOTIFYFLOW_MAX_PAYLOAD_BYTES = env_int("NOTIFYFLOW_MAX_PAYLOAD_BYTES", 256 * 1024)
# The body of every API endpoint but the two bulk ones: a payload and room for the rest.
NOTIFYFLOW_MAX_BODY_BYTES = env_int(
    "NOTIFYFLOW_MAX_BODY_BYTES", NOTIFYFLOW_MAX_PAYLOAD_BYTES + 16 * 1024
)
# The whole body of POST /api/v1/triggers/bulk/ and /api/v1/recipients/bulk/ (up to
# 1,000 items, each payload within NOTIFYFLOW_MAX_PAYLOAD_BYTES).
NOTIFYFLOW_MAX_BULK_BODY_BYTES = env_int("NOTIFYFLOW_MAX_BULK_BODY_BYTES", 16 * 1024 * 1024)
# Django's own limit: only for what is not the API (the console's forms, the unsubscribe
# page, the providers' status webhooks); the API's parser reads past it.
DATA_UPLOAD_MAX_MEMORY_SIZE = NOTIFYFLOW_MAX_PAYLOAD_BYTES + 64 * 1024

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

# --- Templates and definitions ---------------------------------------------------------
# Liquid limits: a template hitting one fails its step permanently, naming the node.
NOTIFYFLOW_TEMPLATE_LOOP_LIMIT = env_int("NOTIFYFLOW_TEMPLATE_LOOP_LIMIT", 10_000)
NOTIFYFLOW_TEMPLATE_OUTPUT_LIMIT = env_int("NOTIFYFLOW_TEMPLATE_OUTPUT_LIMIT", 256 * 1024)
NOTIFYFLOW_TEMPLATE_NAMESPACE_LIMIT = env_int("NOTIFYFLOW_TEMPLATE_NAMESPACE_LIMIT", 256 * 1024)
# Caps checked when a definition is saved.
NOTIFYFLOW_TEMPLATE_MAX_LENGTH = env_int("NOTIFYFLOW_TEMPLATE_MAX_LENGTH", 32 * 1024)
NOTIFYFLOW_DEFINITION_MAX_NODES = env_int("NOTIFYFLOW_DEFINITION_MAX_NODES", 200)
NOTIFYFLOW_DEFINITION_MAX_BYTES = env_int("NOTIFYFLOW_DEFINITION_MAX_BYTES", 256 * 1024)
# Where `manage.py workflows export|validate|diff|sync` read and write workflow files
# (relative: to the current directory); --dir overrides it.
NOTIFYFLOW_WORKFLOWS_DIR = os.environ.get("NOTIFYFLOW_WORKFLOWS_DIR", "notifyflow_workflows/")
# The locale a send renders in when neither its device, its recipient nor its workflow
# names one (translations app); also the catalogue a saved workflow's keys must be in.
NOTIFYFLOW_DEFAULT_LOCALE = os.environ.get("NOTIFYFLOW_DEFAULT_LOCALE", "en")

# --- Personal data ---------------------------------------------------------------------
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
# anymail's tracking webhooks (/webhooks/anymail/<esp>/tracking/): basic auth "user:pass".
if os.environ.get("ANYMAIL_WEBHOOK_SECRET"):
    ANYMAIL["WEBHOOK_SECRET"] = os.environ["ANYMAIL_WEBHOOK_SECRET"]
if os.environ.get("MAILGUN_WEBHOOK_SIGNING_KEY"):
    ANYMAIL["MAILGUN_WEBHOOK_SIGNING_KEY"] = os.environ["MAILGUN_WEBHOOK_SIGNING_KEY"]

SMS_BACKEND = os.environ.get("SMS_BACKEND", "console")
SMS_FILE_PATH = os.environ.get("SMS_FILE_PATH", str(VAR_DIR / "sms"))
SMS_DEFAULT_FROM = os.environ.get("SMS_DEFAULT_FROM", os.environ.get("TWILIO_FROM_NUMBER", ""))
TWILIO_ACCOUNT_SID = os.environ.get("TWILIO_ACCOUNT_SID", "")
TWILIO_AUTH_TOKEN = os.environ.get("TWILIO_AUTH_TOKEN", "")
# Only for tests and local fakes: where the twilio client sends its HTTP requests.
TWILIO_API_BASE_URL = os.environ.get("TWILIO_API_BASE_URL", "")
TWILIO_TIMEOUT_S = env_float("TWILIO_TIMEOUT_S", 10)

# Push and chat providers (executions/providers/push, executions/providers/chat). The
# endpoints are settings so that tests drive the real clients against local fakes.
# FCM: a service account's JSON key (its project_id, client_email, private_key, token_uri).
NOTIFYFLOW_FCM_CREDENTIALS = os.environ.get("NOTIFYFLOW_FCM_CREDENTIALS", "")
NOTIFYFLOW_FCM_URL = os.environ.get("NOTIFYFLOW_FCM_URL", "https://fcm.googleapis.com")
# APNs token authentication: the .p8 key, its key id, the team id; the topic is the app's
# bundle id. NOTIFYFLOW_APNS_URL wins over NOTIFYFLOW_APNS_SANDBOX.
NOTIFYFLOW_APNS_KEY_FILE = os.environ.get("NOTIFYFLOW_APNS_KEY_FILE", "")
NOTIFYFLOW_APNS_KEY_ID = os.environ.get("NOTIFYFLOW_APNS_KEY_ID", "")
NOTIFYFLOW_APNS_TEAM_ID = os.environ.get("NOTIFYFLOW_APNS_TEAM_ID", "")
NOTIFYFLOW_APNS_TOPIC = os.environ.get("NOTIFYFLOW_APNS_TOPIC", "")
NOTIFYFLOW_APNS_SANDBOX = env_bool("NOTIFYFLOW_APNS_SANDBOX", False)
NOTIFYFLOW_APNS_URL = os.environ.get("NOTIFYFLOW_APNS_URL", "")
# Web Push: the VAPID private key (a PEM file's path, PEM text, or base64url) and the
# contact the push services see (mailto: or https:).
NOTIFYFLOW_VAPID_PRIVATE_KEY = os.environ.get("NOTIFYFLOW_VAPID_PRIVATE_KEY", "")
NOTIFYFLOW_VAPID_SUBJECT = os.environ.get("NOTIFYFLOW_VAPID_SUBJECT", "")
NOTIFYFLOW_SLACK_BOT_TOKEN = os.environ.get("NOTIFYFLOW_SLACK_BOT_TOKEN", "")
NOTIFYFLOW_SLACK_API_URL = os.environ.get("NOTIFYFLOW_SLACK_API_URL", "https://slack.com/api/")
# Connect and each read of one push or chat provider call.
NOTIFYFLOW_PUSH_TIMEOUT_S = env_float("NOTIFYFLOW_PUSH_TIMEOUT_S", 10)
NOTIFYFLOW_CHAT_TIMEOUT_S = env_float("NOTIFYFLOW_CHAT_TIMEOUT_S", 10)
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

# The engine, delivery and Celery: notifyflow/engine_settings.py.
from notifyflow.engine_settings import *  # noqa: E402, F403
