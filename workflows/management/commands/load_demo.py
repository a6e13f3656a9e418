from django.core.management.base import BaseCommand

from workflows.demo import DEMO_DEFINITION, DEMO_KEY
from workflows.services import workflow_save


class Command(BaseCommand):
    help = "Create or update the demo workflow (email -> delay 10s -> sms)."

    def handle(self, *args, **options):
        workflow = workflow_save(
            key=DEMO_KEY, name="Welcome demo", definition=DEMO_DEFINITION, actor="load_demo"
        )
        assert workflow.current_version is not None  # workflow_save always sets it
        self.stdout.write(
            f"Demo workflow {workflow.key!r} at version {workflow.current_version.version}"
        )
