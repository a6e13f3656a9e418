from django.core.management.base import BaseCommand, CommandError

from api_keys.models import ApiKeyScope
from api_keys.services import api_key_create
from notifyflow.errors import ApplicationError


class Command(BaseCommand):
    help = "Create an API key. The key is printed once, as the last line of the output."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument(
            "--scope",
            choices=ApiKeyScope.values,
            default=ApiKeyScope.ADMIN,
            help="trigger: create triggers, post events, read own instances; read: read "
            "everything; admin (default): everything",
        )
        parser.add_argument(
            "--workflow",
            action="append",
            default=[],
            dest="workflows",
            help="limit the key to this workflow key (repeatable; default: all workflows)",
        )
        parser.add_argument(
            "--rate",
            default="",
            help="throttle the key: requests per period, e.g. 50/s or 3000/min (over it: "
            "429 with Retry-After); default: not throttled (NOTIFYFLOW_THROTTLE_RATE)",
        )

    def handle(self, *args, name: str, scope: str, workflows: list[str], rate: str, **options):
        try:
            key, raw = api_key_create(name=name, scope=scope, workflows=workflows, rate=rate)
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        limited = f", workflows {', '.join(key.workflows)}" if key.workflows else ""
        limited += f", rate {key.rate}" if key.rate else ""
        self.stderr.write(
            f"Created API key {key.name!r} ({key.prefix}…), scope {key.scope}{limited}. "
            "Store it now:"
        )
        self.stdout.write(raw)
