"""Settings for the test suite: the project's settings with the production guards
satisfied by test-only values (set in the environment, so the worker and management
subprocesses that tests start inherit them)."""

import atexit
import os
import shutil
import tempfile
from urllib.parse import urlsplit, urlunsplit

# Not the checkout's var/.env that `make run` writes (its database, its console backends).
os.environ.setdefault("NOTIFYFLOW_ENV_FILE", "")
os.environ.setdefault("DJANGO_SECRET_KEY", "tests-only-secret-key-" + "0123456789abcdef" * 3)
os.environ.setdefault("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,testserver")
os.environ.setdefault("EMAIL_BACKEND", "django.core.mail.backends.locmem.EmailBackend")
os.environ.setdefault("SMS_BACKEND", "locmem")
# The feed's per-recipient rate (on by default) would count the requests of every test
# for the same recipient id together, across tests and xdist workers sharing the cache:
# off here; tests/api/test_feed_throttle.py turns it on.
os.environ.setdefault("NOTIFYFLOW_FEED_RATE", "")
# Emails of non-critical workflows to recipients carry unsubscribe links under it.
os.environ.setdefault("NOTIFYFLOW_PUBLIC_URL", "http://notifyflow.test")
# Set up once per test process: pytest-xdist (`make test` runs one test process per
# core) starts its processes from a controller that loaded these settings too, and the
# worker and probe subprocesses that a test process starts inherit its choices.
_TEST_PROCESS = os.environ.get("PYTEST_XDIST_WORKER") or "main"
if os.environ.get("NOTIFYFLOW_TEST_PROCESS") != _TEST_PROCESS:
    os.environ["NOTIFYFLOW_TEST_PROCESS"] = _TEST_PROCESS
    _XDIST = _TEST_PROCESS.startswith("gw")
    # A broker of each process's own, so one's flush or worker never sees another's
    # messages (gw0 keeps the one given): on Redis the next database per process, on
    # RabbitMQ the vhost "<vhost>_gw1", ..., which must exist (.ci/run makes them).
    _broker = urlsplit(os.environ.get("CELERY_BROKER_URL", ""))
    _n = int(_TEST_PROCESS[2:]) if _XDIST else 0
    if _n and _broker.scheme.startswith("redis"):
        _db = int(_broker.path.strip("/") or 0) + _n
        os.environ["CELERY_BROKER_URL"] = urlunsplit(_broker._replace(path=f"/{_db}"))
    elif _n and _broker.scheme.startswith("amqp"):
        _vhost = f"{_broker.path[1:] or '/'}_gw{_n}".replace("/", "") or f"gw{_n}"
        os.environ["CELERY_BROKER_URL"] = urlunsplit(_broker._replace(path=f"/{_vhost}"))
    # Files (the embedded filesystem broker, SQLite, mail and SMS files) and metrics in
    # directories of this process's own, never the checkout's var/ that `make run` uses.
    for _name, _prefix in (
        ("NOTIFYFLOW_VAR_DIR", "notifyflow-test-var-"),
        ("PROMETHEUS_MULTIPROC_DIR", "notifyflow-test-metrics-"),
    ):
        if _XDIST or not os.environ.get(_name):
            os.environ[_name] = tempfile.mkdtemp(prefix=_prefix)
            atexit.register(shutil.rmtree, os.environ[_name], True)

from notifyflow.settings import *  # noqa: E402, F403
