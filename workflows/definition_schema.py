"""The definition as JSON Schema, generated from the validator's own specs (each
registered node type's fields and exactly-one-of rule, ``definition.node_types``; the id
pattern and the caps), so the OpenAPI description cannot drift from what
``validate_definition`` accepts. Read at each call: a node type registered since is in.

The schemas use the subset JSON Schema and OpenAPI 3.0 share (no ``const``, no
``nullable``). The validator stays the authority: it also parses every template, checks
the graph (edge endpoints, cycles, reachability) and the webhook host allow-list.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from .definition import (
    MAX_INTERESTS,
    MAX_NAME_LENGTH,
    MAX_RECIPIENTS,
    MAX_RETRY_DELAY_S,
    NODE_ID_RE,
    SEND_WINDOW_KEYS,
    TIME_OF_DAY_RE,
    WEBHOOK_METHODS,
    WEEKDAYS,
    FieldSpec,
    NodeType,
    node_types,
)
from .definition.fields import MAX_OBJECTS_IN_LIST
from .durations import MAX_DURATION_MS, duration_pattern
from .example_workflow import EXAMPLE_DEFINITION
from .example_workflow import EXAMPLE_WORKFLOW as EXAMPLE_WORKFLOW  # for the API views

DEFINITION = "WorkflowDefinition"
EDGE = "WorkflowEdge"
CANCEL_RULE = "WorkflowCancelRule"
RETRY_POLICY = "RetryPolicy"
SEND_WINDOW = "SendWindow"
_SHARED_OBJECTS = {"retry_policy": RETRY_POLICY, "send_window": SEND_WINDOW}


def _template(description: str, *, max_length: int | None = None) -> dict[str, Any]:
    return {
        "type": "string",
        "maxLength": max_length or settings.NOTIFYFLOW_TEMPLATE_MAX_LENGTH,
        "description": description,
    }


def _ref(name: str, prefix: str) -> dict[str, str]:
    return {"$ref": prefix + name}


def _objects(text: str, *, listed: bool) -> dict[str, Any]:
    """A JSON object whose strings are templates, or (``listed``) an array of them."""
    one = {"type": "object", "additionalProperties": True}
    if not listed:
        return {**one, "description": text}
    return {"type": "array", "items": one, "maxItems": MAX_OBJECTS_IN_LIST, "description": text}


def _schedule(text: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "cron": {"type": "string", "maxLength": 200, "description": "A 5-field cron."},
            "timezone": {"type": "string", "maxLength": 64, "description": "An IANA name."},
        },
        "required": ["cron"],
        "additionalProperties": False,
        "description": text,
    }


def _field_schema(field: FieldSpec, prefix: str) -> dict[str, Any]:
    """The JSON Schema of one config field, by its kind."""
    text = field.description
    kind = field.kind
    if kind in ("template", "html_template", "link"):
        return _template(text)
    if kind == "recipients":
        one = _template("an address template", max_length=None) | {"minLength": 1}
        return {
            "description": text,
            "oneOf": [
                one,
                {"type": "array", "minItems": 1, "maxItems": MAX_RECIPIENTS, "items": one},
            ],
        }
    if kind == "int":
        return {"type": "integer", "minimum": 0, "maximum": MAX_DURATION_MS, "description": text}
    if kind in ("duration", "window"):  # "window" > 0: the validator's (no pattern for it)
        return {
            "type": "string",
            "pattern": duration_pattern(),
            "maxLength": 100,
            "description": text,
        }
    if kind == "name":
        return {"type": "string", "minLength": 1, "maxLength": MAX_NAME_LENGTH, "description": text}
    if kind == "condition":
        return _template(text) | {"minLength": 1}
    if kind == "template_list":
        return {"type": "array", "items": _template("a template"), "description": text}
    if kind in ("template_object", "template_object_list"):
        return _objects(text, listed=kind == "template_object_list")
    if kind in _SHARED_OBJECTS:  # {retry_policy, send_window}: one schema each, referenced
        return _ref(_SHARED_OBJECTS[kind], prefix)
    if kind == "schedule":
        return _schedule(text)
    if kind == "http_method":
        return {"type": "string", "enum": list(WEBHOOK_METHODS), "description": text}
    if kind == "webhook_url":
        return _template(text) | {"format": "uri", "pattern": "^[Hh][Tt][Tt][Pp][Ss]?://"}
    if kind == "integer":
        return {
            "type": "integer",
            "minimum": field.minimum,
            "maximum": field.maximum,
            "description": text,
        }
    if kind == "choice":
        return {"type": "string", "enum": list(field.choices), "description": text}
    raise ValueError(f"no JSON Schema for field kind {kind!r}")


def node_component_name(node_type: str) -> str:
    # a_b -> ABNode
    return "".join(part.capitalize() for part in node_type.split("_")) + "Node"


def _node_schema(node_type: NodeType, prefix: str) -> dict[str, Any]:
    spec = node_type.fields
    config: dict[str, Any] = {
        "type": "object",
        "properties": {key: _field_schema(field, prefix) for key, field in spec.items()},
        "additionalProperties": False,
    }
    required = [key for key, field in spec.items() if field.required]
    if required:
        config["required"] = required
    one_of = node_type.exactly_one_of
    if one_of:
        config["oneOf"] = [{"required": [key]} for key in one_of.fields]
        config["description"] = f"Exactly one of {', '.join(one_of.fields)}."
    return {
        "type": "object",
        "description": node_type.description,
        "properties": {
            "id": {
                "type": "string",
                "pattern": NODE_ID_RE.pattern,
                "description": "Unique within the definition: 1-64 letters, digits, _ or -.",
            },
            "type": {"type": "string", "enum": [node_type.name]},
            "config": config,
        },
        "required": ["id", "type", "config"],
        "additionalProperties": False,
    }


def definition_schemas(prefix: str = "#/components/schemas/") -> dict[str, dict[str, Any]]:
    """Every schema a definition needs, by component name; references between them are
    ``prefix + name`` (``#/components/schemas/`` for OpenAPI, ``#/$defs/`` for a
    standalone JSON Schema)."""
    types = node_types.all()
    node_refs = {t.name: prefix + node_component_name(t.name) for t in types}
    node_id = {"type": "string", "pattern": NODE_ID_RE.pattern}
    schemas: dict[str, dict[str, Any]] = {
        node_component_name(t.name): _node_schema(t, prefix) for t in types
    }
    schemas[EDGE] = {
        "type": "object",
        "description": "Edges out of a node are tried in order; the first whose condition "
        "holds (or that has none) is followed. No edge followed: the workflow ends.",
        "properties": {
            "from": node_id | {"description": "id of the node the edge leaves"},
            "to": node_id | {"description": "id of the next node"},
            "condition": _template(
                "Liquid expression over the context, e.g. "
                '`payload.plan == "pro"` or `vars.wait_paid.received`.'
            )
            | {"minLength": 1},
        },
        "required": ["from", "to"],
        "additionalProperties": False,
    }
    schemas[CANCEL_RULE] = {
        "type": "object",
        "description": "A delivered event with this name (and satisfying match) cancels "
        "the instance.",
        "properties": {
            "event": {"type": "string", "minLength": 1, "maxLength": MAX_NAME_LENGTH},
            "match": _template(
                "Liquid expression over the context plus `event`, e.g. "
                "`event.context.order_id == payload.order_id`."
            )
            | {"minLength": 1},
        },
        "required": ["event"],
        "additionalProperties": False,
    }
    # "> 0": OpenAPI 3.0 and JSON Schema spell exclusiveMinimum differently; the validator
    # refuses 0.
    delay_s = {"type": "number", "minimum": 0, "maximum": MAX_RETRY_DELAY_S}
    schemas[RETRY_POLICY] = {
        "type": "object",
        "description": "Retry n waits min(base_delay_s * 2^(n-1), max_delay_s), spread by "
        "jitter; the (max_retries + 1)th failure fails the instance.",
        "properties": {
            "max_retries": {
                "type": "integer",
                "minimum": 0,
                "maximum": 100,
                "description": "retries after the first failure",
            },
            "base_delay_s": delay_s | {"description": "first retry's wait, seconds (> 0)"},
            "max_delay_s": delay_s | {"description": "longest wait, seconds (>= base_delay_s)"},
            "jitter": {
                "type": "number",
                "minimum": 0,
                "maximum": 1,
                "description": "fraction taken off each wait at random",
            },
        },
        "additionalProperties": False,
    }
    time_of_day = {"type": "string", "pattern": TIME_OF_DAY_RE.pattern}
    schemas[SEND_WINDOW] = {
        "type": "object",
        "description": "Sends are allowed on these local weekdays from `from` (inclusive) to "
        "`until` (exclusive); until <= from wraps midnight (the day is the day the window "
        "opened). A local time a DST change skips opens at the next valid minute; an "
        "ambiguous one is its first occurrence.",
        "properties": {
            "days": {
                "type": "array",
                "minItems": 1,
                "maxItems": len(WEEKDAYS),
                "uniqueItems": True,
                "items": {"type": "string", "enum": list(WEEKDAYS)},
            },
            "from": time_of_day | {"description": "opening local time, HH:MM"},
            "until": time_of_day | {"description": "closing local time, HH:MM (not from)"},
            "timezone": {
                "type": "string",
                "minLength": 1,
                "maxLength": 64,
                "description": '"recipient" (the recipient\'s timezone, else UTC) or an IANA '
                'timezone name such as "Europe/Paris".',
            },
        },
        "required": list(SEND_WINDOW_KEYS),
        "additionalProperties": False,
    }
    schemas[DEFINITION] = {
        "type": "object",
        "description": "A workflow's graph: nodes (by type, each with its config), edges "
        "between them, the entry node, and optionally the interests and cancel_on rules "
        "of running instances. String values marked as templates are Liquid, rendered "
        "against {payload, trigger, workflow, vars, now, recipient, unsubscribe_url}.",
        "properties": {
            "entry_node_id": node_id | {"description": "id of the first node"},
            "nodes": {
                "type": "array",
                "minItems": 1,
                "maxItems": settings.NOTIFYFLOW_DEFINITION_MAX_NODES,
                "items": {
                    "oneOf": [{"$ref": ref} for ref in node_refs.values()],
                    "discriminator": {"propertyName": "type", "mapping": node_refs},
                },
            },
            "edges": {"type": "array", "items": _ref(EDGE, prefix)},
            "interests": {
                "type": "array",
                "maxItems": MAX_INTERESTS,
                "items": _template("a template over payload and trigger") | {"minLength": 1},
                "description": "Subjects this instance listens to, rendered when it is "
                'created (e.g. "order:{{ payload.order_id }}"); every instance also '
                "has `instance:<id>`.",
            },
            "cancel_on": {"type": "array", "items": _ref(CANCEL_RULE, prefix)},
        },
        "required": ["entry_node_id", "nodes"],
        "additionalProperties": False,
        "example": EXAMPLE_DEFINITION,
    }
    return schemas


def definition_json_schema() -> dict[str, Any]:
    """A standalone JSON Schema (draft 2020-12) of a definition."""
    defs = definition_schemas("#/$defs/")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$ref": f"#/$defs/{DEFINITION}",
        "$defs": defs,
    }
