from django.apps import AppConfig


class NotifyFlowConfig(AppConfig):
    """The project package as an app: its system checks (static files collected)."""

    name = "notifyflow"
    verbose_name = "NotifyFlow"

    def ready(self) -> None:
        from . import staticfiles  # noqa: F401 - registers its system check
