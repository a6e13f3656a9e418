from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand
from dotenv import dotenv_values, set_key

from api_keys.services import api_key_reuse_or_create

VARIABLE = "NOTIFYFLOW_DEMO_API_KEY"


class Command(BaseCommand):
    help = (
        f"Print the demo's API key (`make run`): the one kept as {VARIABLE} in the env file "
        "while it is active, else a new admin key, saved there. The key is the last line."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--env-file",
            default=settings.ENV_FILE or str(settings.VAR_DIR / ".env"),
            help="where the key is kept (default: var/.env)",
        )

    def handle(self, *args, env_file: str, **options):
        path = Path(env_file)
        saved = dotenv_values(path).get(VARIABLE) if path.exists() else None
        key, raw, created = api_key_reuse_or_create(raw=saved, name="demo (make run)")
        if created:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch(mode=0o600, exist_ok=True)
            # Unquoted (the key is URL-safe), so a shell reads it with
            # `sed -n 's/^NOTIFYFLOW_DEMO_API_KEY=//p' var/.env` (the README's walks).
            set_key(path, VARIABLE, raw, quote_mode="never")
            self.stderr.write(f"Created API key {key.name!r} ({key.prefix}…), kept in {path}:")
        else:
            self.stderr.write(f"Reusing API key {key.name!r} ({key.prefix}…) from {path}:")
        self.stdout.write(raw)
