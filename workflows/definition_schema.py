"""The definition as JSON Schema, generated from the validator's own specs
(``NODE_CONFIG_SPECS``, ``EXACTLY_ONE_OF``, the id pattern and the caps), so the OpenAPI
description cannot drift from what ``validate_definition`` accepts.

The schemas use the subset JSON Schema and OpenAPI 3.0 share (no ``const``, no
``nullable``). The validator stays the authority: it also parses every template, checks
the graph (edge endpoints, cycles, reachability) and the webhook host allow-list.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from .definition import (
    EXACTLY_ONE_OF,
    MAX_INTERESTS,
    MAX_NAME_LENGTH,
    MAX_RECIPIENTS,
    MAX_RETRY_DELAY_S,
    NODE_CONFIG_SPECS,
    NODE_DESCRIPTIONS,
    NODE_ID_RE,
    SEND_WINDOW_KEYS,
    TIME_OF_DAY_RE,
    WEBHOOK_METHODS,
    WEEKDAYS,
    FieldSpec,
)
from .definition.specs import BATCH_MAX_ITEMS, BATCH_MIN_ITEMS, CHOICE_KINDS, MAX_THROTTLE_LIMIT
from .durations import MAX_DURATION_MS, duration_pattern

DEFINITION = "WorkflowDefinition"
EDGE = "WorkflowEdge"
CANCEL_RULE = "WorkflowCancelRule"
RETRY_POLICY = "RetryPolicy"
SEND_WINDOW = "SendWindow"

# A complete workflow: welcome email, then wait up to two days for the order to be
# paid; paid -> thank-you SMS and an event for other workflows, unpaid -> a reminder
# email a day later. Cancelled when the order is cancelled.
EXAMPLE_DEFINITION: dict[str, Any] = {
    "entry_node_id": "welcome",
    "interests": ["order:{{ payload.order_id }}"],
    "cancel_on": [
        {"event": "order.cancelled", "match": "event.context.order_id == payload.order_id"}
    ],
    "nodes": [
        {
            "id": "welcome",
            "type": "email",
            "config": {
                "to": "{{ payload.email }}",
                "subject": "Your order {{ payload.order_id }}",
                "body": "Hi {{ payload.name | default: 'there' }}, thanks for your order.",
                "html_body": "<p>Hi {{ payload.name | default: 'there' }},</p>",
            },
        },
        {
            "id": "paid",
            "type": "wait",
            "config": {
                "event": "order.paid",
                "timeout": "2d",
                "match": "event.context.order_id == payload.order_id",
            },
        },
        {
            "id": "thanks",
            "type": "sms",
            "config": {
                "to": "{{ payload.phone }}",
                "body": "Payment received for order {{ payload.order_id }}. Thank you!",
            },
        },
        {
            "id": "announce",
            "type": "emit",
            "config": {
                "event": "customer.paid",
                "subjects": ["customer:{{ payload.customer_id }}"],
                "context": {"order_id": "{{ payload.order_id }}"},
            },
        },
        {"id": "later", "type": "delay", "config": {"duration": "1d"}},
        {
            "id": "reminder",
            "type": "email",
            "config": {
                "to": "{{ payload.email }}",
                "subject": "Your order {{ payload.order_id }} is waiting",
                "body": "We have not received your payment yet.",
                "retry": {"max_retries": 5, "base_delay_s": 30},
            },
        },
    ],
    "edges": [
        {"from": "welcome", "to": "paid"},
        {"from": "paid", "to": "thanks", "condition": "vars.wait_paid.received and payload.phone"},
        {"from": "paid", "to": "announce", "condition": "vars.wait_paid.received"},
        {"from": "thanks", "to": "announce"},
        {"from": "paid", "to": "later"},
        {"from": "later", "to": "reminder"},
    ],
}

EXAMPLE_WORKFLOW: dict[str, Any] = {
    "key": "order-follow-up",
    "name": "Order follow-up",
    "is_active": True,
    "definition": EXAMPLE_DEFINITION,
}


def _template(description: str, *, max_length: int | None = None) -> dict[str, Any]:
    return {
        "type": "string",
        "maxLength": max_length or settings.NOTIFYFLOW_TEMPLATE_MAX_LENGTH,
        "description": description,
    }


def _ref(name: str, prefix: str) -> dict[str, str]:
    return {"$ref": prefix + name}


# Integer field kinds and their bounds.
_INT_BOUNDS: dict[str, tuple[int, int]] = {
    "batch_max_items": (BATCH_MIN_ITEMS, BATCH_MAX_ITEMS),
    "throttle_limit": (1, MAX_THROTTLE_LIMIT),
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
    if kind == "template_object":
        return {"type": "object", "additionalProperties": True, "description": text}
    if kind == "retry_policy":
        return _ref(RETRY_POLICY, prefix)
    if kind == "send_window":
        return _ref(SEND_WINDOW, prefix)
    if kind == "http_method":
        return {"type": "string", "enum": list(WEBHOOK_METHODS), "description": text}
    if kind == "webhook_url":
        return _template(text) | {"format": "uri", "pattern": "^[Hh][Tt][Tt][Pp][Ss]?://"}
    if kind in _INT_BOUNDS:  # gates (SPEC §13): batch max_items, throttle limit
        low, high = _INT_BOUNDS[kind]
        return {"type": "integer", "minimum": low, "maximum": high, "description": text}
    if kind in CHOICE_KINDS:
        return {"type": "string", "enum": list(CHOICE_KINDS[kind]), "description": text}
    raise ValueError(f"no JSON Schema for field kind {kind!r}")


def node_component_name(node_type: str) -> str:
    # in_app -> InAppNode
    return "".join(part.capitalize() for part in node_type.split("_")) + "Node"


def _node_schema(node_type: str, prefix: str) -> dict[str, Any]:
    spec = NODE_CONFIG_SPECS[node_type]
    config: dict[str, Any] = {
        "type": "object",
        "properties": {key: _field_schema(field, prefix) for key, field in spec.items()},
        "additionalProperties": False,
    }
    required = [key for key, field in spec.items() if field.required]
    if required:
        config["required"] = required
    one_of = EXACTLY_ONE_OF.get(node_type)
    if one_of:
        config["oneOf"] = [{"required": [key]} for key in one_of]
        config["description"] = f"Exactly one of {', '.join(one_of)}."
    return {
        "type": "object",
        "description": NODE_DESCRIPTIONS[node_type],
        "properties": {
            "id": {
                "type": "string",
                "pattern": NODE_ID_RE.pattern,
                "description": "Unique within the definition: 1-64 letters, digits, _ or -.",
            },
            "type": {"type": "string", "enum": [node_type]},
            "config": config,
        },
        "required": ["id", "type", "config"],
        "additionalProperties": False,
    }


def definition_schemas(prefix: str = "#/components/schemas/") -> dict[str, dict[str, Any]]:
    """Every schema a definition needs, by component name; references between them are
    ``prefix + name`` (``#/components/schemas/`` for OpenAPI, ``#/$defs/`` for a
    standalone JSON Schema)."""
    node_refs = {t: prefix + node_component_name(t) for t in NODE_CONFIG_SPECS}
    node_id = {"type": "string", "pattern": NODE_ID_RE.pattern}
    schemas: dict[str, dict[str, Any]] = {
        node_component_name(t): _node_schema(t, prefix) for t in NODE_CONFIG_SPECS
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
