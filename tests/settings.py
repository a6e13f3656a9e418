"""Settings for the test suite: the project's settings with the production guards
satisfied by test-only values (set in the environment, so the worker and management
subprocesses that tests start inherit them)."""

import atexit
import os
import shutil
import tempfile

# Not the checkout's var/.env that `make run` writes (its database, its console backends).
os.environ.setdefault("NOTIFYFLOW_ENV_FILE", "")
os.environ.setdefault("DJANGO_SECRET_KEY", "tests-only-secret-key-" + "0123456789abcdef" * 3)
os.environ.setdefault("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,testserver")
os.environ.setdefault("EMAIL_BACKEND", "django.core.mail.backends.locmem.EmailBackend")
os.environ.setdefault("SMS_BACKEND", "locmem")
# Emails of non-critical workflows to recipients carry unsubscribe links under it.
os.environ.setdefault("NOTIFYFLOW_PUBLIC_URL", "http://notifyflow.test")
# A metrics directory of this run's own (its workers inherit it), not the checkout's
# var/prometheus that a `make run` next to the tests writes to.
if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="notifyflow-test-metrics-")
    atexit.register(shutil.rmtree, os.environ["PROMETHEUS_MULTIPROC_DIR"], True)

from notifyflow.settings import *  # noqa: E402, F403
