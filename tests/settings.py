"""Settings for the test suite: the project's settings with the production guards
satisfied by test-only values (set in the environment, so the worker and management
subprocesses that tests start inherit them)."""

import os

os.environ.setdefault("DJANGO_SECRET_KEY", "tests-only-secret-key-" + "0123456789abcdef" * 3)
os.environ.setdefault("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,testserver")
os.environ.setdefault("EMAIL_BACKEND", "django.core.mail.backends.locmem.EmailBackend")
os.environ.setdefault("SMS_BACKEND", "locmem")

from notifyflow.settings import *  # noqa: E402, F403
