"""``manage.py translations extract [--locale L]``: the translation keys the templates of
every workflow's current version use, per namespace (the workflow's key), as JSON;
``--locale`` adds the keys that locale's catalogues lack (``missing``)."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand

from translations.locales import locale_check
from translations.selectors import translator
from workflows.definition.translation_keys import definition_keys
from workflows.models import Workflow


class Command(BaseCommand):
    help = "Translation keys the workflows' templates use, per namespace (JSON on stdout)."

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        extract = actions.add_parser("extract", help="print the keys per namespace")
        extract.add_argument("--locale", default="", help="also list the keys it lacks")

    def handle(self, *args: Any, action: str, locale: str, **options: Any) -> None:
        if locale:
            locale_check(locale)
        found: dict[str, Any] = {}
        workflows = Workflow.objects.select_related("current_version").order_by("key")
        for workflow in workflows:
            definition = workflow.definition
            if definition is None:
                continue
            keys = sorted({key for _, _, key in definition_keys(definition["nodes"])})
            if not keys:
                continue
            entry: dict[str, Any] = {"keys": keys}
            if locale:
                lookup = translator(
                    locale=locale, namespace=workflow.key, default=workflow.default_locale
                )
                for key in keys:
                    lookup.gettext(key)
                entry["missing"] = lookup.missing
            found[workflow.key] = entry
        self.stdout.write(json.dumps(found, indent=2, ensure_ascii=False))
