"""Settings for benchmark runs: the project's settings plus the in-run reference app.

Used by every process a bench run starts (gunicorn, celery workers, the orchestrator),
so the app under test and its reference run with identical framework configuration.
"""

from notifyflow.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "bench.reference_app"]  # noqa: F405
ROOT_URLCONF = "bench.urls"
