from django.apps import AppConfig


class ExecutionsConfig(AppConfig):
    name = "executions"
    verbose_name = "Executions"

    def ready(self) -> None:
        from anymail.signals import tracking
        from django.conf import settings

        from . import checks, worker_hooks  # noqa: F401 - checks registers itself
        from .nodes import load_node_modules
        from .tracking import anymail_tracking_received

        # The built-in node types registered (importing .nodes), then a deployment's own.
        load_node_modules(settings.NOTIFYFLOW_NODE_MODULES)

        worker_hooks.install()
        tracking.connect(anymail_tracking_received, dispatch_uid="notifyflow.delivery_status")
