"""The JSON Schema of a ``workflow.json`` file: the settings, and the definition's own
schema (``workflows.definition_schema``, the one the API publishes) with every node
config field also writable as ``"<field>@": "<file>"``. ``export`` writes it once at the
top of the directory (``workflows.files.SCHEMA_FILE``) and every file's ``$schema``
points at it, so an editor completes and checks the files offline. The validator stays
the authority (templates, the graph, the webhook host allow-list)."""

from __future__ import annotations

import json
from typing import Any

from .concurrency import MAX_LIMIT, MAX_TEMPLATE_LENGTH
from .definition import MAX_NAME_LENGTH, node_types
from .definition_schema import DEFINITION, definition_schemas, node_component_name
from .files import KEY_RE, MAX_CATEGORIES, REFERENCE
from .models import Priority

PREFIX = "#/$defs/"


def workflow_file_schema() -> dict[str, Any]:
    """A standalone JSON Schema (draft 2020-12) of a workflow file."""
    defs = definition_schemas(PREFIX)
    for node_type in node_types.all():
        config = defs[node_component_name(node_type.name)]["properties"]["config"]
        defs[node_component_name(node_type.name)]["properties"]["config"] = _with_references(config)
    slug = {"type": "string", "pattern": KEY_RE.pattern}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "NotifyFlow workflow",
        "description": "One workflow: <key>/workflow.json in the workflows directory "
        "(manage.py workflows). Settings left out take their default.",
        "type": "object",
        "properties": {
            "$schema": {"type": "string"},
            "key": slug | {"description": "The workflow's key: the folder's name"},
            "name": {"type": "string", "minLength": 1, "maxLength": MAX_NAME_LENGTH},
            "is_active": {"type": "boolean", "description": "Default true"},
            "critical": {"type": "boolean", "description": "Default false"},
            "categories": {
                "type": "array",
                "maxItems": MAX_CATEGORIES,
                "uniqueItems": True,
                "items": slug,
            },
            "priority": {"type": "string", "enum": list(Priority.values)},
            "default_locale": {
                "type": "string",
                "maxLength": 35,
                "description": 'The locale its sends render in when the recipient names none; "":'
                " NOTIFYFLOW_DEFAULT_LOCALE",
            },
            "translations": {
                "type": "object",
                "description": "{locale: messages}; in files: translations/<locale>.json",
            },
            "concurrency": {
                "oneOf": [
                    {"type": "null"},
                    {
                        "type": "object",
                        "properties": {
                            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
                            "key": {"type": "string", "maxLength": MAX_TEMPLATE_LENGTH},
                        },
                        "required": ["limit"],
                        "additionalProperties": False,
                    },
                ]
            },
            "definition": {"$ref": PREFIX + DEFINITION},
        },
        "required": ["key", "name", "definition"],
        "additionalProperties": False,
        "$defs": defs,
    }


def workflow_file_schema_text() -> str:
    """The schema file's text: the same settings always give the same bytes."""
    return json.dumps(workflow_file_schema(), indent=2, sort_keys=True) + "\n"


def _with_references(config: dict[str, Any]) -> dict[str, Any]:
    """A node config's schema where each field may instead be ``<field>@``: a file name."""
    properties = dict(config["properties"])
    for name in config["properties"]:
        properties[name + REFERENCE] = {
            "type": "string",
            "minLength": 1,
            "description": f"A file in the workflow's folder whose text is {name}",
        }
    schema = {key: value for key, value in config.items() if key not in ("required", "oneOf")}
    schema["properties"] = properties
    either = [_present(name) for name in config.get("required", ())]
    if "oneOf" in config:
        either.append({"oneOf": [_present(rule["required"][0]) for rule in config["oneOf"]]})
    if either:
        schema["allOf"] = either
    return schema


def _present(name: str) -> dict[str, Any]:
    """``name`` given inline or as a file (not both: the reader refuses that)."""
    return {"oneOf": [{"required": [name]}, {"required": [name + REFERENCE]}]}
