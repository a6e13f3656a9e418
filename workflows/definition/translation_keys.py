"""The translation keys a definition's templates ask ``t`` for (python-liquid's message
extraction), and those the default locale's catalogue lacks: every send in a locale
without the key would fall back to the key itself."""

from __future__ import annotations

from typing import Any

from translations.selectors import default_keys, default_locale
from workflows.templating import translation_keys

from . import node_types
from .problems import DefinitionProblem
from .variables import json_strings


def definition_keys(nodes: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """``(node id, field path, key)`` for each key a node's template passes to ``t`` as a
    string literal, in order. ``nodes`` must be validated."""
    found: list[tuple[str, str, str]] = []
    for index, node in enumerate(nodes):
        spec = node_types.get(node["type"]).fields
        for name, value in node["config"].items():
            if name not in spec or not spec[name].is_template or spec[name].kind == "condition":
                continue
            for where, source in json_strings(value, f"nodes[{index}].config.{name}"):
                found.extend((node["id"], where, key) for key in translation_keys(source))
    return found


def check_translation_keys(
    nodes: list[dict[str, Any]], *, namespace: str, locale: str = ""
) -> list[DefinitionProblem]:
    """A ``translation_missing`` problem for each key a node's template uses that is in
    neither ``namespace``'s nor ``common``'s catalogue of the default locale (``locale``,
    else NOTIFYFLOW_DEFAULT_LOCALE). Reads the catalogues only when a template uses
    ``t``."""
    used = definition_keys(nodes)
    if not used:
        return []
    known = default_keys(namespace=namespace, default=locale)
    return [
        DefinitionProblem(
            where,
            f"translation key {key!r} is not in the {default_locale(locale)!r} catalogue of "
            f"{namespace!r} or 'common'",
            node_id,
            "translation_missing",
        )
        for node_id, where, key in used
        if key not in known
    ]
