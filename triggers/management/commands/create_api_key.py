from django.core.management.base import BaseCommand

from triggers.services import api_key_create


class Command(BaseCommand):
    help = "Create an API key. The key is printed once, as the last line of the output."

    def add_arguments(self, parser):
        parser.add_argument("name")

    def handle(self, *args, name: str, **options):
        key, raw = api_key_create(name=name)
        self.stderr.write(f"Created API key {key.name!r} ({key.prefix}…). Store it now:")
        self.stdout.write(raw)
