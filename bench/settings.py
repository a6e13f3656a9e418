"""Settings for benchmark runs: the project's settings plus the in-run reference app.

Used by every process a bench run starts (gunicorn, celery workers, the orchestrator),
so the app under test and its reference run with identical framework configuration.
"""

import os

# Benchmarks run on loopback with local backends: the production guards' values.
os.environ.setdefault("DJANGO_SECRET_KEY", "bench-only-secret-key-" + "0123456789abcdef" * 3)
os.environ.setdefault("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1")
os.environ.setdefault("NOTIFYFLOW_ALLOW_CONSOLE_BACKENDS", "1")
# Load generators are one key hammering the API on purpose.
os.environ.setdefault("NOTIFYFLOW_THROTTLE_RATE", "")
# ... and a handful of recipients polling their feed thousands of times a second.
os.environ.setdefault("NOTIFYFLOW_FEED_RATE", "")

from notifyflow.settings import *  # noqa: E402, F403

INSTALLED_APPS = [*INSTALLED_APPS, "bench.reference_app"]  # noqa: F405
ROOT_URLCONF = "bench.urls"
