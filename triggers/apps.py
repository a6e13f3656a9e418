from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_save


class TriggersConfig(AppConfig):
    name = "triggers"
    verbose_name = "Triggers"

    def ready(self) -> None:
        from workflows.models import Workflow

        from . import checks  # noqa: F401 - registers its system check

        post_save.connect(
            _forget_workflows, sender=Workflow, dispatch_uid="triggers_forget_workflows"
        )


def _forget_workflows(**kwargs: Any) -> None:
    """A saved workflow (activation, new version) is seen by this process's next POST."""
    from .services import workflows_by_key

    workflows_by_key.clear()
