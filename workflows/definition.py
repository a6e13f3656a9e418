"""Workflow definitions: the one validator used by the API, the admin and any import.

A definition is ``{"entry_node_id", "nodes": [{id, type, config}], "edges": [{from, to,
condition?}]}``. ``validate_definition`` returns a normalized copy or raises
``DefinitionError`` whose ``errors`` each name the node and the field.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from notifyflow.errors import ApplicationError
from notifyflow.limits import MAX_JSON_DEPTH, json_depth_exceeds

from .durations import MAX_DURATION_MS, parse_duration
from .templating import TemplateError, check_condition, check_template, variable_paths

NODE_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True)
class FieldSpec:
    required: bool
    # "template" | "html_template" | "int" (milliseconds, bounded) | "duration" | "name"
    # (a plain non-empty string) | "condition" (a Liquid expression) | "template_list" |
    # "template_object" | "recipients" (one address template, or a JSON list of them:
    # each renders to exactly one address, never split) | "retry_policy" |
    # "http_method" | "webhook_url"
    kind: str
    # What the field means, for the OpenAPI schema and the docs.
    description: str = ""

    @property
    def is_template(self) -> bool:
        """Whether the value's strings are Liquid templates rendered against the context
        (every kind but numbers, durations, names, conditions and the HTTP method)."""
        return self.kind in TEMPLATE_KINDS


TEMPLATE_KINDS = frozenset(
    {"template", "html_template", "template_list", "template_object", "recipients", "webhook_url"}
)

_RETRY = FieldSpec(
    False,
    "retry_policy",
    "This node's retry policy for transient provider failures, instead of the "
    "NOTIFYFLOW_MAX_RETRIES / NOTIFYFLOW_RETRY_BASE_DELAY_S defaults.",
)

NODE_CONFIG_SPECS: dict[str, dict[str, FieldSpec]] = {
    "email": {
        "to": FieldSpec(
            True,
            "recipients",
            "Recipient: a template rendering to exactly one email address, or a list of "
            "such templates (one address each).",
        ),
        "subject": FieldSpec(True, "template", "Subject line (template)."),
        "body": FieldSpec(True, "template", "Plain-text body (template)."),
        "html_body": FieldSpec(
            False, "html_template", "HTML body (template; values are HTML-escaped)."
        ),
        "from_email": FieldSpec(
            False, "template", "Sender (template); DEFAULT_FROM_EMAIL when omitted."
        ),
        "reply_to": FieldSpec(
            False, "recipients", "Reply-To: one address template or a list of them."
        ),
        "retry": _RETRY,
    },
    "sms": {
        "to": FieldSpec(
            True, "template", "Recipient: a template rendering to one E.164 phone number."
        ),
        "body": FieldSpec(True, "template", "Message text (template); must not render empty."),
        "retry": _RETRY,
    },
    "delay": {
        "delay_ms": FieldSpec(False, "int", "Wait this many milliseconds."),
        "duration": FieldSpec(
            False, "duration", 'Wait this long: "90s", "15m", "2h", "1d", "1h30m" or "PT15M".'
        ),
        "until": FieldSpec(
            False,
            "template",
            "Wait until this instant: a template rendering to an ISO-8601 timestamp "
            "(a past instant continues at once).",
        ),
    },
    "wait": {
        "event": FieldSpec(True, "name", "Name of the event to wait for."),
        "timeout": FieldSpec(False, "duration", 'Give up after this long ("24h", "PT30M", ...).'),
        "timeout_ms": FieldSpec(False, "int", "Give up after this many milliseconds."),
        "match": FieldSpec(
            False,
            "condition",
            "Liquid expression an event must satisfy, over the context plus `event` "
            "({name, event_id, context, received_at}), e.g. "
            "`event.context.order_id == payload.order_id`.",
        ),
    },
    "emit": {
        "event": FieldSpec(True, "template", "Name of the event to raise (template)."),
        "subjects": FieldSpec(
            False,
            "template_list",
            "Subjects (templates): running instances with an equal interest receive it.",
        ),
        "context": FieldSpec(
            False,
            "template_object",
            "The event's context; string values are templates. Default: the payload.",
        ),
        "event_id": FieldSpec(
            False, "template", "Event id (template). Default: `<instance id>:<node id>`."
        ),
    },
    "webhook": {
        "url": FieldSpec(
            True,
            "webhook_url",
            "http(s) URL whose host is literal and listed in NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS; "
            "the path and query may be templates.",
        ),
        "method": FieldSpec(False, "http_method", "HTTP method (default POST)."),
        "body": FieldSpec(True, "template_object", "JSON body sent; string values are templates."),
        "headers": FieldSpec(
            False, "template_object", "Extra request headers; values are templates."
        ),
        "retry": _RETRY,
    },
}
NODE_DESCRIPTIONS: dict[str, str] = {
    "email": "Send an email through the configured email backend(s). Output in "
    "`vars.email_<node id>`: {message_id, to, subject, sent_at}.",
    "sms": "Send an SMS through the configured SMS backend(s). Output in "
    "`vars.sms_<node id>`: {message_id, to, sent_at}.",
    "delay": "Pause the instance (exactly one of delay_ms, duration, until); no worker "
    "is held while it waits.",
    "wait": "Wait for an event in the instance's inbox (including events that arrived "
    "earlier), at most until the timeout (exactly one of timeout, timeout_ms). Output in "
    "`vars.wait_<node id>`: {received, event}.",
    "emit": "Raise an event, processed like POST /api/v1/events/ once the step is "
    "recorded (never twice). Output in `vars.emit_<node id>`: {name, event_id, subjects}.",
    "webhook": "Call an allowed HTTP endpoint with a signed JSON body. Output in "
    "`vars.webhook_<node id>`.",
}
# Fields of which a node needs exactly one.
EXACTLY_ONE_OF: dict[str, tuple[str, ...]] = {
    "delay": ("delay_ms", "duration", "until"),
    "wait": ("timeout", "timeout_ms"),
}
MAX_INTERESTS = 20
MAX_RECIPIENTS = 50
MAX_NAME_LENGTH = 200
NODE_TYPES = tuple(NODE_CONFIG_SPECS)


@dataclass
class DefinitionProblem:
    field: str
    message: str
    node: str | None = None
    code: str = "invalid_definition"

    def as_dict(self) -> dict[str, Any]:
        return {"node": self.node, "field": self.field, "code": self.code, "message": self.message}

    def __str__(self) -> str:
        where = f"node {self.node!r}, " if self.node else ""
        return f"{where}{self.field}: {self.message}"


class DefinitionError(ApplicationError):
    """An invalid definition: ``errors`` lists every problem, each naming node and field
    (the API reports them as ``definition.<field>``)."""

    def __init__(self, errors: list[DefinitionProblem]) -> None:
        self.errors = errors
        details: list[dict[str, str | None]] = [
            {"field": _api_field(p), "code": p.code, "message": f"{_api_field(p)}: {p}"}
            for p in errors
        ]
        first = details[0]
        super().__init__(
            code=str(first["code"]),
            field=first["field"],
            message=str(first["message"]),
            details=details,
        )


def _api_field(problem: DefinitionProblem) -> str:
    return "definition" if problem.field == "definition" else f"definition.{problem.field}"


def validate_definition(definition: Any) -> dict[str, Any]:
    """Validate a definition (structure, node configs, templates, graph); return the
    normalized definition or raise DefinitionError listing every problem."""
    problems: list[DefinitionProblem] = []
    if not isinstance(definition, dict):
        raise DefinitionError([DefinitionProblem("definition", "must be a JSON object")])
    _check_caps(definition)
    unknown = set(definition) - {"entry_node_id", "nodes", "edges", "interests", "cancel_on"}
    for key in sorted(unknown):
        problems.append(DefinitionProblem(key, "unknown field", code="unknown_field"))

    nodes = definition.get("nodes")
    edges = definition.get("edges", [])
    entry = definition.get("entry_node_id")
    if not isinstance(nodes, list) or not nodes:
        problems.append(DefinitionProblem("nodes", "must be a non-empty list of nodes"))
        nodes = []
    if not isinstance(edges, list):
        problems.append(DefinitionProblem("edges", "must be a list of edges"))
        edges = []

    ids: list[str] = []
    clean_nodes: list[dict[str, Any]] = []
    for index, node in enumerate(nodes):
        path = f"nodes[{index}]"
        if not isinstance(node, dict):
            problems.append(DefinitionProblem(path, "must be an object {id, type, config}"))
            continue
        node_id = node.get("id")
        label = node_id if isinstance(node_id, str) else None
        if not isinstance(node_id, str) or not NODE_ID_RE.match(node_id):
            problems.append(
                DefinitionProblem(
                    f"{path}.id",
                    "must be 1-64 letters, digits, '_' or '-'",
                    node=label,
                    code="invalid_node_id",
                )
            )
        elif node_id in ids:
            problems.append(
                DefinitionProblem(
                    f"{path}.id",
                    f"duplicate node id {node_id!r}",
                    node=node_id,
                    code="duplicate_node_id",
                )
            )
        else:
            ids.append(node_id)
        for key in sorted(set(node) - {"id", "type", "config"}):
            problems.append(
                DefinitionProblem(
                    f"{path}.{key}", "unknown field", node=label, code="unknown_field"
                )
            )
        node_type = node.get("type")
        if not isinstance(node_type, str) or node_type not in NODE_CONFIG_SPECS:
            problems.append(
                DefinitionProblem(
                    f"{path}.type",
                    f"must be one of {', '.join(NODE_TYPES)}",
                    node=label,
                    code="invalid_node_type",
                )
            )
            continue
        config = node.get("config", {})
        if not isinstance(config, dict):
            problems.append(DefinitionProblem(f"{path}.config", "must be an object", node=label))
            continue
        problems.extend(_check_config(node_type, config, f"{path}.config", label))
        clean_nodes.append({"id": node_id, "type": node_type, "config": _without_nulls(config)})

    if not isinstance(entry, str) or not entry:
        problems.append(DefinitionProblem("entry_node_id", "is required", code="required"))
    elif entry not in ids:
        problems.append(
            DefinitionProblem(
                "entry_node_id",
                f"no node has id {entry!r}",
                node=entry,
                code="unknown_node",
            )
        )

    clean_edges: list[dict[str, Any]] = []
    for index, edge in enumerate(edges):
        path = f"edges[{index}]"
        if not isinstance(edge, dict):
            problems.append(DefinitionProblem(path, "must be an object {from, to, condition?}"))
            continue
        for key in sorted(set(edge) - {"from", "to", "condition"}):
            problems.append(
                DefinitionProblem(f"{path}.{key}", "unknown field", code="unknown_field")
            )
        ok = True
        for end in ("from", "to"):
            value = edge.get(end)
            if not isinstance(value, str) or value not in ids:
                ok = False
                problems.append(
                    DefinitionProblem(
                        f"{path}.{end}",
                        f"no node has id {value!r}",
                        node=value if isinstance(value, str) else None,
                        code="unknown_node",
                    )
                )
        condition = edge.get("condition")
        if condition is not None:
            if not isinstance(condition, str):
                problems.append(
                    DefinitionProblem(
                        f"{path}.condition", "must be a string", node=edge.get("from")
                    )
                )
            else:
                source = edge.get("from")
                problem = _template_problem(
                    condition,
                    f"{path}.condition",
                    source if isinstance(source, str) else None,
                    kind="condition",
                )
                if problem:
                    problems.append(problem)
        if ok:
            clean = {"from": edge["from"], "to": edge["to"]}
            if isinstance(condition, str):
                clean["condition"] = condition
            clean_edges.append(clean)

    if not problems:
        cycle = _find_cycle(ids, clean_edges)
        if cycle:
            problems.append(
                DefinitionProblem(
                    "edges",
                    "the graph has a cycle: " + " -> ".join(cycle),
                    node=cycle[0],
                    code="cycle",
                )
            )
        problems.extend(_unreachable(clean_nodes, clean_edges, str(entry)))
    interests = definition.get("interests", [])
    problems.extend(_check_interests(interests))
    cancel_on = definition.get("cancel_on", [])
    problems.extend(_check_cancel_on(cancel_on))
    if not problems:
        problems.extend(_check_variables(clean_nodes, clean_edges, interests, cancel_on))
    if problems:
        raise DefinitionError(problems)
    clean_definition: dict[str, Any] = {
        "entry_node_id": entry,
        "nodes": clean_nodes,
        "edges": clean_edges,
    }
    if interests:
        clean_definition["interests"] = interests
    if cancel_on:
        clean_definition["cancel_on"] = [
            {k: v for k, v in rule.items() if v is not None} for rule in cancel_on
        ]
    return clean_definition


def _without_nulls(config: dict[str, Any]) -> dict[str, Any]:
    """The config as stored: a field set to null means "not given" to the validator and
    the executors, so it is dropped (also inside ``retry``), and what is stored matches
    the definition's JSON Schema."""
    clean = {}
    for key, value in config.items():
        if value is None:
            continue
        if key == "retry" and isinstance(value, dict):
            value = {k: v for k, v in value.items() if v is not None}
        clean[key] = value
    return clean


def _check_caps(definition: dict[str, Any]) -> None:
    """Size caps, checked before anything walks the definition."""
    if json_depth_exceeds(definition, MAX_JSON_DEPTH):
        raise DefinitionError(
            [
                DefinitionProblem(
                    "definition", f"nested more than {MAX_JSON_DEPTH} levels deep", code="too_deep"
                )
            ]
        )
    size = len(json.dumps(definition, separators=(",", ":"), default=str).encode())
    limit = settings.NOTIFYFLOW_DEFINITION_MAX_BYTES
    if size > limit:
        raise DefinitionError(
            [
                DefinitionProblem(
                    "definition",
                    f"{size} bytes is over the limit of {limit} bytes",
                    code="definition_too_large",
                )
            ]
        )
    nodes = definition.get("nodes")
    most = settings.NOTIFYFLOW_DEFINITION_MAX_NODES
    if isinstance(nodes, list) and len(nodes) > most:
        raise DefinitionError(
            [
                DefinitionProblem(
                    "nodes",
                    f"{len(nodes)} nodes is over the limit of {most}",
                    code="too_many_nodes",
                )
            ]
        )


def _template_problem(
    value: str, path: str, node: str | None, *, html: bool = False, kind: str = "template"
) -> DefinitionProblem | None:
    """The problem with one template (or condition) string, if any: too long or does not
    parse."""
    limit = settings.NOTIFYFLOW_TEMPLATE_MAX_LENGTH
    if len(value) > limit:
        return DefinitionProblem(
            path, f"{len(value)} characters is over the limit of {limit}", node, "too_long"
        )
    try:
        if kind == "condition":
            check_condition(value)
        else:
            check_template(value, html=html)
    except TemplateError as exc:
        what = "Liquid expression" if kind == "condition" else "Liquid template"
        return DefinitionProblem(path, f"invalid {what}: {exc}", node, "invalid_template")
    return None


def _check_interests(interests: Any) -> list[DefinitionProblem]:
    """``interests``: Liquid templates over payload and trigger, rendered at creation."""
    if not isinstance(interests, list) or len(interests) > MAX_INTERESTS:
        return [
            DefinitionProblem("interests", f"must be a list of at most {MAX_INTERESTS} templates")
        ]
    problems = []
    for index, template in enumerate(interests):
        path = f"interests[{index}]"
        if not isinstance(template, str) or not template.strip():
            problems.append(DefinitionProblem(path, "must be a non-empty template string"))
            continue
        problem = _template_problem(template, path, None)
        if problem:
            problems.append(problem)
    return problems


def _check_cancel_on(rules: Any) -> list[DefinitionProblem]:
    """``cancel_on: [{event, match?}]``: a delivered event that matches cancels."""
    if not isinstance(rules, list):
        return [DefinitionProblem("cancel_on", "must be a list of {event, match?}")]
    problems = []
    for index, rule in enumerate(rules):
        path = f"cancel_on[{index}]"
        if not isinstance(rule, dict):
            problems.append(DefinitionProblem(path, "must be an object {event, match?}"))
            continue
        for key in sorted(set(rule) - {"event", "match"}):
            problems.append(
                DefinitionProblem(f"{path}.{key}", "unknown field", code="unknown_field")
            )
        event = rule.get("event")
        if not isinstance(event, str) or not event.strip() or len(event) > MAX_NAME_LENGTH:
            problems.append(
                DefinitionProblem(f"{path}.event", "must be an event name", code="required")
            )
        if "match" in rule:  # optional, but when given an expression (null is not one)
            problems.extend(_check_condition_field(rule["match"], f"{path}.match", None))
    return problems


def _check_condition_field(value: Any, path: str, node: str | None) -> list[DefinitionProblem]:
    if not isinstance(value, str) or not value.strip():
        return [DefinitionProblem(path, "must be a Liquid expression", node=node)]
    problem = _template_problem(value, path, node, kind="condition")
    return [problem] if problem else []


def _check_template_value(value: Any, path: str, node: str | None) -> list[DefinitionProblem]:
    """A template string, or (for lists and objects) any JSON whose strings are templates."""
    if isinstance(value, str):
        problem = _template_problem(value, path, node)
        return [problem] if problem else []
    if isinstance(value, list):
        return [
            p for i, v in enumerate(value) for p in _check_template_value(v, f"{path}[{i}]", node)
        ]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _check_template_value(v, f"{path}.{k}", node)]
    return []


def _check_recipients(value: Any, path: str, node: str | None) -> list[DefinitionProblem]:
    """One address template, or a non-empty JSON list of them (at most MAX_RECIPIENTS)."""
    if isinstance(value, str):
        if not value.strip():
            return [DefinitionProblem(path, "must not be empty", node=node, code="required")]
        problem = _template_problem(value, path, node)
        return [problem] if problem else []
    if (
        not isinstance(value, list)
        or not value
        or len(value) > MAX_RECIPIENTS
        or not all(isinstance(v, str) and v.strip() for v in value)
    ):
        return [
            DefinitionProblem(
                path,
                f"must be an address template or a list of 1-{MAX_RECIPIENTS} of them",
                node=node,
            )
        ]
    return _check_template_value(value, path, node)


def _check_config(
    node_type: str, config: dict[str, Any], path: str, node: str | None
) -> list[DefinitionProblem]:
    problems: list[DefinitionProblem] = []
    spec = NODE_CONFIG_SPECS[node_type]
    for key in sorted(set(config) - set(spec)):
        problems.append(
            DefinitionProblem(
                f"{path}.{key}",
                f"unknown field for a {node_type} node",
                node=node,
                code="unknown_field",
            )
        )
    for key, field in spec.items():
        value = config.get(key)
        if value is None:
            if field.required:
                problems.append(
                    DefinitionProblem(f"{path}.{key}", "is required", node=node, code="required")
                )
            continue
        if field.kind == "name":
            if not isinstance(value, str) or not value.strip() or len(value) > MAX_NAME_LENGTH:
                problems.append(
                    DefinitionProblem(
                        f"{path}.{key}", "must be an event name", node=node, code="required"
                    )
                )
        elif field.kind == "condition":
            problems.extend(_check_condition_field(value, f"{path}.{key}", node))
        elif field.kind == "template_list":
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                problems.append(
                    DefinitionProblem(f"{path}.{key}", "must be a list of templates", node=node)
                )
            else:
                problems.extend(_check_template_value(value, f"{path}.{key}", node))
        elif field.kind == "template_object":
            if not isinstance(value, dict):
                problems.append(DefinitionProblem(f"{path}.{key}", "must be an object", node=node))
            else:
                problems.extend(_check_template_value(value, f"{path}.{key}", node))
        elif field.kind == "recipients":
            problems.extend(_check_recipients(value, f"{path}.{key}", node))
        elif field.kind == "int":
            if (
                isinstance(value, bool)
                or not isinstance(value, int)
                or not 0 <= value <= MAX_DURATION_MS
            ):
                problems.append(
                    DefinitionProblem(
                        f"{path}.{key}",
                        f"must be an integer from 0 to {MAX_DURATION_MS} (milliseconds)",
                        node=node,
                    )
                )
        elif field.kind == "retry_policy":
            problems.extend(_check_retry_policy(value, f"{path}.{key}", node))
        elif field.kind == "http_method":
            if value not in WEBHOOK_METHODS:
                problems.append(
                    DefinitionProblem(
                        f"{path}.{key}", f"must be one of {', '.join(WEBHOOK_METHODS)}", node=node
                    )
                )
        elif field.kind == "webhook_url":
            problems.extend(_check_webhook_url(value, f"{path}.{key}", node))
        elif field.kind == "duration":
            try:
                parse_duration(value)
            except ValueError as exc:
                problems.append(DefinitionProblem(f"{path}.{key}", str(exc), node=node))
        else:
            if not isinstance(value, str):
                problems.append(DefinitionProblem(f"{path}.{key}", "must be a string", node=node))
                continue
            if field.required and not value.strip():
                problems.append(
                    DefinitionProblem(
                        f"{path}.{key}", "must not be empty", node=node, code="required"
                    )
                )
                continue
            problem = _template_problem(
                value, f"{path}.{key}", node, html=field.kind == "html_template"
            )
            if problem:
                problems.append(problem)
    one_of = EXACTLY_ONE_OF.get(node_type, ())
    if one_of and sum(config.get(k) is not None for k in one_of) != 1:
        # The field named is the node's config for a delay and its timeout for a wait,
        # with a code of its own for each (clients match on them).
        problems.append(
            DefinitionProblem(
                path if node_type == "delay" else f"{path}.timeout",
                f"a {node_type} needs exactly one of {', '.join(one_of)}",
                node=node,
                code="invalid_delay" if node_type == "delay" else "invalid_timeout",
            )
        )
    return problems


RETRY_KEYS = ("max_retries", "base_delay_s", "max_delay_s", "jitter")
MAX_RETRY_DELAY_S = 7 * 24 * 3600
WEBHOOK_METHODS = ("POST", "PUT")


def _check_retry_policy(value: Any, path: str, node: str | None) -> list[DefinitionProblem]:
    """``retry: {max_retries?, base_delay_s?, max_delay_s?, jitter?}`` on a sending node."""
    if not isinstance(value, dict):
        return [DefinitionProblem(path, "must be an object {max_retries, base_delay_s, ...}", node)]
    problems = [
        DefinitionProblem(f"{path}.{key}", "unknown field", node=node, code="unknown_field")
        for key in sorted(set(value) - set(RETRY_KEYS))
    ]

    def number(key: str) -> float | None:
        given = value.get(key)
        if given is None:
            return None
        if isinstance(given, bool) or not isinstance(given, int | float):
            problems.append(DefinitionProblem(f"{path}.{key}", "must be a number", node=node))
            return None
        return float(given)

    retries = value.get("max_retries")
    if retries is not None and (
        isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= 100
    ):
        problems.append(
            DefinitionProblem(f"{path}.max_retries", "must be an integer from 0 to 100", node)
        )
    base, cap, jitter = number("base_delay_s"), number("max_delay_s"), number("jitter")
    for key, given in (("base_delay_s", base), ("max_delay_s", cap)):
        if given is not None and not 0 < given <= MAX_RETRY_DELAY_S:
            problems.append(
                DefinitionProblem(
                    f"{path}.{key}", f"must be > 0 and at most {MAX_RETRY_DELAY_S} s", node
                )
            )
    if base is not None and cap is not None and cap < base:
        problems.append(DefinitionProblem(f"{path}.max_delay_s", "must be >= base_delay_s", node))
    if jitter is not None and not 0 <= jitter <= 1:
        problems.append(DefinitionProblem(f"{path}.jitter", "must be from 0 to 1", node))
    return problems


# Ports a bare allow-list entry (no ``:port``) lets the webhook node call: the web's.
WEBHOOK_DEFAULT_PORTS = frozenset({80, 443})


def webhook_host_allowed(host: str, *, port: int) -> bool:
    """Whether NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS lets the webhook node call ``host`` on
    ``port`` (the URL's, or its scheme's default). An entry is ``host`` or
    ``*.example.com`` (subdomains), optionally with ``:port``: with a port it allows that
    port only; without, only 80 and 443 - so ``localhost`` does not open the database's
    or the broker's port. Checked at save and again at send."""
    from urllib.parse import urlsplit

    host = host.lower().rstrip(".")
    for entry in settings.NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS:
        parts = urlsplit(f"//{entry}")
        try:
            allowed_port = parts.port
        except ValueError:
            continue  # a malformed entry allows nothing
        allowed = (parts.hostname or "").rstrip(".")
        if not allowed:
            continue
        if allowed_port is None:
            port_allowed = port in WEBHOOK_DEFAULT_PORTS
        else:
            port_allowed = port == allowed_port
        if not port_allowed:
            continue
        if host == allowed or (allowed.startswith("*.") and host.endswith(allowed[1:])):
            return True
    return False


def webhook_url_port(scheme: str, port: int | None) -> int:
    """The port a URL of ``scheme`` with explicit ``port`` (or None) connects to."""
    return port if port is not None else (443 if scheme == "https" else 80)


def _check_webhook_url(value: Any, path: str, node: str | None) -> list[DefinitionProblem]:
    """An http(s) URL whose scheme and host are literal (only the path and query may be
    templates), so the host is known at save and checked against the allow-list."""
    from urllib.parse import urlsplit

    if not isinstance(value, str) or not value.strip():
        return [DefinitionProblem(path, "must be an http(s) URL", node=node, code="required")]
    try:
        check_template(value)
    except TemplateError as exc:
        return [
            DefinitionProblem(
                path, f"invalid Liquid template: {exc}", node=node, code="invalid_template"
            )
        ]
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return [DefinitionProblem(path, "must be an http(s) URL", node=node, code="invalid_url")]
    if "{" in parts.netloc or "@" in parts.netloc:
        return [
            DefinitionProblem(
                path,
                "the host must be literal text (no template, no user info)",
                node=node,
                code="invalid_url",
            )
        ]
    try:
        port = webhook_url_port(parts.scheme, parts.port)
    except ValueError:
        return [DefinitionProblem(path, "invalid port", node=node, code="invalid_url")]
    if not webhook_host_allowed(parts.hostname or "", port=port):
        return [
            DefinitionProblem(
                path,
                f"host {parts.hostname!r} port {port} is not allowed by "
                "NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS (an entry without :port allows 80 and 443)",
                node=node,
                code="host_not_allowed",
            )
        ]
    return []


# What a template sees (the engine builds this context): a node's fields and the edge
# conditions; a condition in a node (a wait's match) also sees the event. Interests are
# rendered when the instance is created, cancel_on against each delivered event.
NODE_SCOPE = ("payload", "trigger", "workflow", "vars", "now")
INTEREST_SCOPE = ("payload", "trigger")
CANCEL_SCOPE = ("payload", "trigger", "event")
# Node types whose output the engine keeps as ``vars.<type>_<node id>``.
TYPES_WITH_VARS = ("email", "sms", "wait", "emit", "webhook")


def _check_variables(
    nodes: list[dict[str, Any]],
    edges: list[dict[str, Any]],
    interests: list[str],
    cancel_on: list[dict[str, Any]],
) -> list[DefinitionProblem]:
    """A problem for each template or condition that reads a variable its context never
    has: a misspelt root (``paylod.name``) or ``vars.<key>`` no node of this workflow
    writes. In a template that is a permanent failure of every instance; in a condition
    it is silently always false."""
    vars_keys = sorted(f"{n['type']}_{n['id']}" for n in nodes if n["type"] in TYPES_WITH_VARS)
    problems: list[DefinitionProblem] = []

    def check(
        source: str, path: str, node: str | None, scope: tuple[str, ...], condition: bool
    ) -> None:
        message = _unknown_variable(source, scope, vars_keys, condition=condition)
        if message:
            problems.append(DefinitionProblem(path, message, node, "unknown_variable"))

    for index, node in enumerate(nodes):
        spec = NODE_CONFIG_SPECS[node["type"]]
        for key, value in node["config"].items():
            field, path = spec[key], f"nodes[{index}].config.{key}"
            if field.kind == "condition":
                check(value, path, node["id"], NODE_SCOPE + ("event",), True)
            elif field.is_template:
                for where, source in _strings(value, path):
                    check(source, where, node["id"], NODE_SCOPE, False)
    for index, edge in enumerate(edges):
        if "condition" in edge:
            check(edge["condition"], f"edges[{index}].condition", edge["from"], NODE_SCOPE, True)
    for index, template in enumerate(interests):
        check(template, f"interests[{index}]", None, INTEREST_SCOPE, False)
    for index, rule in enumerate(cancel_on):
        if rule.get("match") is not None:
            check(rule["match"], f"cancel_on[{index}].match", None, CANCEL_SCOPE, True)
    return problems


def _unknown_variable(
    source: str, scope: tuple[str, ...], vars_keys: list[str], *, condition: bool
) -> str | None:
    for path in variable_paths(source, condition=condition):
        if not path:
            continue
        if path[0] not in scope:
            return f"unknown variable {path[0]!r}{_hint(path[0], scope)}; here a template sees " + (
                ", ".join(scope)
            )
        if path[0] == "vars" and len(path) > 1 and path[1] not in vars_keys:
            written = ", ".join(f"vars.{k}" for k in vars_keys) or "none"
            return (
                f"vars.{path[1]}: no node of this workflow writes it{_hint(path[1], vars_keys)} "
                f"(nodes write {written}: <type>_<node id> of email, sms, wait, emit and "
                "webhook nodes)"
            )
    return None


def _hint(name: str, known: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _strings(value: Any, path: str) -> list[tuple[str, str]]:
    """Every string inside a JSON value, with its path."""
    if isinstance(value, str):
        return [(path, value)]
    if isinstance(value, list):
        return [s for i, v in enumerate(value) for s in _strings(v, f"{path}[{i}]")]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in _strings(v, f"{path}.{k}")]
    return []


def _unreachable(
    nodes: list[dict[str, Any]], edges: list[dict[str, Any]], entry: str
) -> list[DefinitionProblem]:
    """A problem for each node no path of edges leads to from the entry node: it could
    never run, which is almost always a missing or misspelt edge."""
    successors: dict[str, list[str]] = {}
    for edge in edges:
        successors.setdefault(edge["from"], []).append(edge["to"])
    reached = {entry}
    pending = [entry]
    while pending:
        for nxt in successors.get(pending.pop(), []):
            if nxt not in reached:
                reached.add(nxt)
                pending.append(nxt)
    return [
        DefinitionProblem(
            f"nodes[{index}]",
            f"unreachable: no edge leads to it from the entry node {entry!r}",
            node=node["id"],
            code="unreachable_node",
        )
        for index, node in enumerate(nodes)
        if node["id"] not in reached
    ]


def _find_cycle(ids: list[str], edges: list[dict[str, Any]]) -> list[str] | None:
    """A cycle as a list of node ids (first == last), or None. Iterative depth-first
    search: a long chain of nodes must not hit Python's recursion limit."""
    graph: dict[str, list[str]] = {i: [] for i in ids}
    for edge in edges:
        graph[edge["from"]].append(edge["to"])
    white, grey, black = 0, 1, 2
    color = dict.fromkeys(ids, white)
    for root in ids:
        if color[root] != white:
            continue
        color[root] = grey
        path = [root]
        # One iterator of successors per node on the current path.
        pending = [iter(graph[root])]
        while pending:
            nxt = next(pending[-1], None)
            if nxt is None:
                color[path.pop()] = black
                pending.pop()
            elif color[nxt] == grey:
                return path[path.index(nxt) :] + [nxt]
            elif color[nxt] == white:
                color[nxt] = grey
                path.append(nxt)
                pending.append(iter(graph[nxt]))
    return None


def node_by_id(definition: dict[str, Any], node_id: str) -> dict[str, Any]:
    for node in definition["nodes"]:
        if node["id"] == node_id:
            return node
    raise KeyError(node_id)


def outgoing_edges(definition: dict[str, Any], node_id: str) -> list[dict[str, Any]]:
    return [edge for edge in definition["edges"] if edge["from"] == node_id]
