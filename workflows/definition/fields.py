"""Checks of the values a definition holds: each node config field by its kind (one
check per kind, FIELD_CHECKS), templates and conditions, interests and ``cancel_on``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache
from typing import Any
from zoneinfo import available_timezones

from django.conf import settings

from workflows.durations import MAX_DURATION_MS, parse_duration
from workflows.templating import TemplateError, check_condition, check_template

from .links import link_template_problem
from .problems import DefinitionProblem
from .schedule import check_schedule
from .specs import (
    MAX_INTERESTS,
    MAX_NAME_LENGTH,
    MAX_RECIPIENTS,
    MAX_RETRY_DELAY_S,
    RETRY_KEYS,
    SEND_WINDOW_KEYS,
    TIME_OF_DAY_RE,
    WEBHOOK_METHODS,
    WEEKDAYS,
    ExactlyOneOf,
    FieldSpec,
)
from .webhooks import check_webhook_url


def template_problem(
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


def check_interests(interests: Any) -> list[DefinitionProblem]:
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
        problem = template_problem(template, path, None)
        if problem:
            problems.append(problem)
    return problems


def check_cancel_on(rules: Any) -> list[DefinitionProblem]:
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
            problems.extend(check_condition_field(rule["match"], f"{path}.match", None))
    return problems


def check_condition_field(value: Any, path: str, node: str | None) -> list[DefinitionProblem]:
    if not isinstance(value, str) or not value.strip():
        return [DefinitionProblem(path, "must be a Liquid expression", node=node)]
    problem = template_problem(value, path, node, kind="condition")
    return [problem] if problem else []


def _check_template_value(value: Any, path: str, node: str | None) -> list[DefinitionProblem]:
    """A template string, or (for lists and objects) any JSON whose strings are templates."""
    if isinstance(value, str):
        problem = template_problem(value, path, node)
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
        problem = template_problem(value, path, node)
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


@cache
def _timezones() -> frozenset[str]:
    """The IANA names zoneinfo knows (as a recipient's timezone is checked)."""
    return frozenset(available_timezones())


def _is_timezone(name: Any) -> bool:
    return isinstance(name, str) and name in _timezones()


def _check_send_window(value: Any, path: str, node: str | None) -> list[DefinitionProblem]:
    """``send_window: {days, from, until, timezone}`` on an email or SMS node."""
    if not isinstance(value, dict):
        return [DefinitionProblem(path, "must be an object {days, from, until, timezone}", node)]
    problems = [
        DefinitionProblem(f"{path}.{key}", "unknown field", node=node, code="unknown_field")
        for key in sorted(set(value) - set(SEND_WINDOW_KEYS))
    ]
    for key in SEND_WINDOW_KEYS:
        if value.get(key) is None:
            problems.append(DefinitionProblem(f"{path}.{key}", "is required", node, "required"))
    days = value.get("days")
    if days is not None and (
        not isinstance(days, list)
        or not days
        or not all(isinstance(d, str) and d in WEEKDAYS for d in days)
        or len(set(days)) != len(days)
    ):
        problems.append(
            DefinitionProblem(
                f"{path}.days", f"must be a non-empty list of distinct {', '.join(WEEKDAYS)}", node
            )
        )
    for key in ("from", "until"):
        given = value.get(key)
        if given is not None and not (isinstance(given, str) and TIME_OF_DAY_RE.match(given)):
            problems.append(
                DefinitionProblem(f"{path}.{key}", "must be a time HH:MM (00:00-23:59)", node)
            )
    if value.get("from") is not None and value.get("from") == value.get("until"):
        problems.append(DefinitionProblem(f"{path}.until", "must differ from from", node))
    zone = value.get("timezone")
    if zone is not None and zone != "recipient" and not _is_timezone(zone):
        problems.append(
            DefinitionProblem(
                f"{path}.timezone",
                'must be "recipient" or an IANA timezone name such as "Europe/Paris"',
                node,
            )
        )
    return problems


# (value, path, node id, the field's spec) -> its problems.
FieldCheck = Callable[[Any, str, str | None, FieldSpec], list[DefinitionProblem]]


def _name_problems(
    value: Any, path: str, node: str | None, field: FieldSpec
) -> list[DefinitionProblem]:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_NAME_LENGTH:
        return [DefinitionProblem(path, "must be an event name", node=node, code="required")]
    return []


def _template_list_problems(
    value: Any, path: str, node: str | None, field: FieldSpec
) -> list[DefinitionProblem]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return [DefinitionProblem(path, "must be a list of templates", node=node)]
    return _check_template_value(value, path, node)


def _template_object_problems(
    value: Any, path: str, node: str | None, field: FieldSpec
) -> list[DefinitionProblem]:
    if not isinstance(value, dict):
        return [DefinitionProblem(path, "must be an object", node=node)]
    return _check_template_value(value, path, node)


# Slack's limit of blocks in one message.
MAX_OBJECTS_IN_LIST = 50


def _template_object_list_problems(
    value: Any, path: str, node: str | None, field: FieldSpec
) -> list[DefinitionProblem]:
    """A JSON array of objects (Slack's Block Kit ``blocks``) whose strings are
    templates."""
    if (
        not isinstance(value, list)
        or not all(isinstance(v, dict) for v in value)
        or len(value) > MAX_OBJECTS_IN_LIST
    ):
        return [
            DefinitionProblem(
                path, f"must be a list of at most {MAX_OBJECTS_IN_LIST} objects", node=node
            )
        ]
    return _check_template_value(value, path, node)


def _milliseconds_problems(
    value: Any, path: str, node: str | None, field: FieldSpec
) -> list[DefinitionProblem]:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_DURATION_MS:
        return [
            DefinitionProblem(
                path, f"must be an integer from 0 to {MAX_DURATION_MS} (milliseconds)", node=node
            )
        ]
    return []


def _http_method_problems(
    value: Any, path: str, node: str | None, field: FieldSpec
) -> list[DefinitionProblem]:
    if value not in WEBHOOK_METHODS:
        return [DefinitionProblem(path, f"must be one of {', '.join(WEBHOOK_METHODS)}", node=node)]
    return []


def _duration_problems(
    value: Any, path: str, node: str | None, field: FieldSpec
) -> list[DefinitionProblem]:
    try:
        length = parse_duration(value)
    except ValueError as exc:
        return [DefinitionProblem(path, str(exc), node=node)]
    if field.kind == "window" and not length:
        # A zero window is no gate at all (a throttle of 1 per 0s lets everything through).
        return [
            DefinitionProblem(
                path, f"{value!r} is zero: must be longer than 0", node, "zero_duration"
            )
        ]
    return []


def _template_string_problems(
    value: Any, path: str, node: str | None, field: FieldSpec
) -> list[DefinitionProblem]:
    """A "template" or "html_template" field: one non-empty (when required) string."""
    if not isinstance(value, str):
        return [DefinitionProblem(path, "must be a string", node=node)]
    if field.required and not value.strip():
        return [DefinitionProblem(path, "must not be empty", node=node, code="required")]
    problem = template_problem(value, path, node, html=field.kind == "html_template")
    return [problem] if problem else []


def _link_problems(
    value: Any, path: str, node: str | None, field: FieldSpec
) -> list[DefinitionProblem]:
    """A person's link (``in_app.url``): a template, and no scheme but http(s) where its
    text fixes one (definition/links.py)."""
    problems = _template_string_problems(value, path, node, field)
    if problems:
        return problems
    problem = link_template_problem(value)
    return [DefinitionProblem(path, problem, node, "invalid_url")] if problem else []


def _integer_problems(
    value: Any, path: str, node: str | None, field: FieldSpec
) -> list[DefinitionProblem]:
    """An "integer" field: from the spec's ``minimum`` to its ``maximum``."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not field.minimum <= value <= field.maximum
    ):
        return [
            DefinitionProblem(
                path, f"must be an integer from {field.minimum} to {field.maximum}", node=node
            )
        ]
    return []


def _choice_problems(
    value: Any, path: str, node: str | None, field: FieldSpec
) -> list[DefinitionProblem]:
    if value not in field.choices:
        return [DefinitionProblem(path, f"must be one of {', '.join(field.choices)}", node=node)]
    return []


def _ignoring_spec(
    check: Callable[[Any, str, str | None], list[DefinitionProblem]],
) -> FieldCheck:
    return lambda value, path, node, field: check(value, path, node)


# The check of each field kind (FieldSpec.kind); "template" and "html_template" are the
# default.
FIELD_CHECKS: dict[str, FieldCheck] = {
    "name": _name_problems,
    "condition": _ignoring_spec(check_condition_field),
    "template_list": _template_list_problems,
    "template_object": _template_object_problems,
    "template_object_list": _template_object_list_problems,
    "recipients": _ignoring_spec(_check_recipients),
    "int": _milliseconds_problems,
    "retry_policy": _ignoring_spec(_check_retry_policy),
    "http_method": _http_method_problems,
    "webhook_url": _ignoring_spec(check_webhook_url),
    "duration": _duration_problems,
    "window": _duration_problems,
    "link": _link_problems,
    "send_window": _ignoring_spec(_check_send_window),
    "schedule": _ignoring_spec(check_schedule),
    "integer": _integer_problems,
    "choice": _choice_problems,
}
STRING_KINDS = ("template", "html_template")


def known_kind(kind: str) -> bool:
    """Whether a field of this kind can be checked (and described: the JSON Schema
    knows the same kinds)."""
    return kind in FIELD_CHECKS or kind in STRING_KINDS


def check_config(
    node_type: str,
    fields: Mapping[str, FieldSpec],
    one_of: ExactlyOneOf | None,
    config: dict[str, Any],
    *,
    path: str,
    node: str | None,
) -> list[DefinitionProblem]:
    """Every problem of one node's ``config``, as its type declares its ``fields``:
    unknown fields, each field by its kind (FIELD_CHECKS), and the exactly-one-of rule."""
    problems = [
        DefinitionProblem(
            f"{path}.{key}",
            f"unknown field for a {node_type} node",
            node=node,
            code="unknown_field",
        )
        for key in sorted(set(config) - set(fields))
    ]
    for key, field in fields.items():
        value = config.get(key)
        if value is None:
            if field.required:
                problems.append(
                    DefinitionProblem(f"{path}.{key}", "is required", node=node, code="required")
                )
            continue
        check = FIELD_CHECKS.get(field.kind, _template_string_problems)
        problems.extend(check(value, f"{path}.{key}", node, field))
    if one_of and sum(config.get(k) is not None for k in one_of.fields) != 1:
        problems.append(
            DefinitionProblem(
                f"{path}.{one_of.at}" if one_of.at else path,
                f"a {node_type} needs exactly one of {', '.join(one_of.fields)}",
                node=node,
                code=one_of.code,
            )
        )
    return problems


def without_nulls(config: dict[str, Any]) -> dict[str, Any]:
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
