import re
from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError

from triggers.retention import finished_purge

_AGE = re.compile(r"^(\d+)([dh])$")


def parse_age(text: str) -> timedelta:
    match = _AGE.match(text.strip())
    if not match or int(match.group(1)) <= 0:
        raise CommandError(f"--older-than {text!r}: expected e.g. 30d or 12h")
    amount, unit = int(match.group(1)), match.group(2)
    return timedelta(days=amount) if unit == "d" else timedelta(hours=amount)


class Command(BaseCommand):
    help = (
        "Delete finished (completed, failed, cancelled) instances older than --older-than, "
        "with their step logs, deliveries and audit rows, old event records and expired "
        "throttle counters; in batches."
    )

    def add_arguments(self, parser):
        parser.add_argument("--older-than", required=True, help="age, e.g. 30d or 12h")
        parser.add_argument("--batch", type=int, default=500, help="instances per transaction")

    def handle(self, *args, older_than: str, batch: int, **options):
        if batch <= 0:
            raise CommandError("--batch must be positive")
        counts = finished_purge(older_than=parse_age(older_than), batch=batch)
        self.stdout.write(
            f"purged {counts['instances']} instances, {counts['event_records']} event records,"
            f" {counts['webhook_messages']} status webhook messages"
            f" and {counts['throttle_counters']} expired throttle counters"
        )
