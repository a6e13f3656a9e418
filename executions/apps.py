from django.apps import AppConfig


class ExecutionsConfig(AppConfig):
    name = "executions"
    verbose_name = "Executions"

    def ready(self) -> None:
        from anymail.signals import tracking

        from . import checks, worker_hooks  # noqa: F401 - checks registers itself
        from .tracking import anymail_tracking_received

        worker_hooks.install()
        tracking.connect(anymail_tracking_received, dispatch_uid="notifyflow.delivery_status")
