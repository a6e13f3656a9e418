from django.apps import AppConfig


class ExecutionsConfig(AppConfig):
    name = "executions"
    verbose_name = "Executions"

    def ready(self) -> None:
        from . import worker_hooks

        worker_hooks.install()
