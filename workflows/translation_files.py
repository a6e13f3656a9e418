"""A workflow's catalogues as files: ``<key>/translations/<locale>.json``, each the
messages of that locale in the workflow's namespace. A folder without ``translations/``
leaves the stored catalogues alone; with it, its files are the namespace's catalogues
(``workflows.sync`` writes them before the workflow, whose keys are checked against
them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from notifyflow.errors import ApplicationError
from translations.locales import locale_check, messages_check

TRANSLATIONS_DIR = "translations"


def translations_problem(value: Any) -> str | None:
    """What is wrong with ``{locale: messages}`` (a document's ``translations``), if
    anything."""
    if not isinstance(value, dict):
        return "must be an object of locale: messages"
    for locale, messages in value.items():
        try:
            locale_check(locale, field=str(locale))
            messages_check(messages, field=str(locale))
        except ApplicationError as exc:
            return exc.message
    return None


def read_translations(folder: Path) -> tuple[dict[str, Any] | None, list[tuple[str, str]]]:
    """The folder's ``translations/*.json`` by locale (None without the directory), and
    ``(file, message)`` for each file that is not JSON."""
    directory = folder / TRANSLATIONS_DIR
    if not directory.is_dir():
        return None, []
    found: dict[str, Any] = {}
    problems: list[tuple[str, str]] = []
    for path in sorted(directory.glob("*.json")):
        file = f"{folder.name}/{TRANSLATIONS_DIR}/{path.name}"
        try:
            found[path.stem] = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            problems.append((file, f"not JSON: {exc}"))
    return found, problems


def translation_files(translations: dict[str, Any] | None) -> dict[str, str]:
    """What ``export`` writes for them: one file per locale, keys sorted."""
    return {
        f"{TRANSLATIONS_DIR}/{locale}.json": json.dumps(
            messages, indent=2, ensure_ascii=False, sort_keys=True
        )
        + "\n"
        for locale, messages in sorted((translations or {}).items())
    }
