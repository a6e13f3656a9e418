"""The in-run reference: a bare DRF get_or_create endpoint and a Celery no-op task."""
