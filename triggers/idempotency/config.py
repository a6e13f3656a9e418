"""The idempotency setting of a workflow trigger: parsed, validated, normalized.

The stored JSON uses the documented camelCase names (``strategy``, ``ttlMinutes``,
``contextFields``, ``includeTriggerId``, ``includeEventType``, ``includeEventId``,
``customExpression``, ``failOnMissingContext``). ``IdempotencySettings.parse`` is the one
validator: the API, the admin form and the model's ``clean`` all call it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from .expression import ExpressionError, parse_template

# Ten years: a bigger window is a misconfiguration, and it keeps the stored integer small.
MAX_TTL_MINUTES = 10 * 365 * 24 * 60
MAX_CONTEXT_FIELDS = 20
MAX_CONTEXT_FIELD_LENGTH = 100
MAX_EXPRESSION_LENGTH = 1000


class Strategy(StrEnum):
    NONE = "NONE"
    UUID = "UUID"
    TIME_WINDOW = "TIME_WINDOW"
    CONTEXT_BASED = "CONTEXT_BASED"
    CONTEXT_TIME_WINDOW = "CONTEXT_TIME_WINDOW"
    EVENT_BASED = "EVENT_BASED"
    CUSTOM_EXPRESSION = "CUSTOM_EXPRESSION"


#: Strategies whose key is a fresh uuid4 on every event (no deduplication).
RANDOM_STRATEGIES = frozenset({Strategy.NONE, Strategy.UUID})
WINDOW_STRATEGIES = frozenset({Strategy.TIME_WINDOW, Strategy.CONTEXT_TIME_WINDOW})
CONTEXT_STRATEGIES = frozenset({Strategy.CONTEXT_BASED, Strategy.CONTEXT_TIME_WINDOW})

KNOWN_KEYS = (
    "strategy",
    "ttlMinutes",
    "contextFields",
    "includeTriggerId",
    "includeEventType",
    "includeEventId",
    "customExpression",
    "failOnMissingContext",
)


class SettingsError(ValueError):
    """An invalid idempotency setting. ``field`` is the offending key (``ttlMinutes``,
    ``contextFields[1]``) or None when the whole value is wrong."""

    def __init__(self, field: str | None, message: str, code: str = "invalid") -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field, self.message, self.code = field, message, code


def _bool(raw: Mapping[str, Any], name: str, default: bool) -> bool:
    value = raw.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise SettingsError(name, "must be true or false", "invalid_type")
    return value


@dataclass(frozen=True)
class IdempotencySettings:
    strategy: Strategy = Strategy.UUID
    ttl_minutes: int | None = None
    context_fields: tuple[str, ...] = field(default_factory=tuple)
    include_trigger_id: bool = True
    include_event_type: bool = False
    include_event_id: bool = False
    custom_expression: str | None = None
    fail_on_missing_context: bool = False

    @classmethod
    def parse(cls, raw: Any) -> IdempotencySettings:
        """Validate ``raw`` (a mapping, JSON text, or None for "no settings").

        None, ``""`` and ``{}`` are the default (UUID). A key given as ``null`` counts as
        absent. Raises SettingsError naming the field for an unknown strategy or key, a
        wrong type, a missing required field, or a custom expression that does not parse.
        """
        mapping = _as_mapping(raw)
        if mapping is None:
            return cls()
        strategy = _strategy(mapping)
        ttl = _ttl_minutes(mapping, strategy)
        context_fields = _context_fields(mapping, strategy)
        expression = _custom_expression(mapping, strategy)
        include_event_type = _bool(mapping, "includeEventType", False)
        include_event_id = _bool(mapping, "includeEventId", False)
        if strategy is Strategy.EVENT_BASED and not (include_event_type or include_event_id):
            # With both off the key would not depend on the event at all.
            raise SettingsError(
                "includeEventId",
                "EVENT_BASED needs includeEventType and/or includeEventId set to true",
                "required",
            )
        return cls(
            strategy=strategy,
            ttl_minutes=ttl,
            context_fields=context_fields,
            include_trigger_id=_bool(mapping, "includeTriggerId", True),
            include_event_type=include_event_type,
            include_event_id=include_event_id,
            custom_expression=expression,
            fail_on_missing_context=_bool(mapping, "failOnMissingContext", False),
        )

    def to_json(self) -> dict[str, Any]:
        """The normalized stored form: every option, with its default when not set."""
        return {
            "strategy": self.strategy.value,
            "ttlMinutes": self.ttl_minutes,
            "contextFields": list(self.context_fields),
            "includeTriggerId": self.include_trigger_id,
            "includeEventType": self.include_event_type,
            "includeEventId": self.include_event_id,
            "customExpression": self.custom_expression,
            "failOnMissingContext": self.fail_on_missing_context,
        }

    @property
    def is_random(self) -> bool:
        """True when every generated key is a fresh uuid4 (NONE, UUID)."""
        return self.strategy in RANDOM_STRATEGIES


def default_setting_json() -> dict[str, Any]:
    """Model default for ``WorkflowTrigger.idempotency_setting`` (a callable: fresh dict)."""
    return IdempotencySettings().to_json()


# --- the checks of ``parse``, one option each, in the order its errors are reported ----


def _as_mapping(raw: Any) -> Mapping[str, Any] | None:
    """The setting as a mapping of known options; None for "no settings"."""
    if raw is None:
        return None
    if isinstance(raw, (str, bytes)):
        if not raw.strip():
            return None
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            raise SettingsError(None, f"not valid JSON ({exc})", "invalid_json") from exc
    if not isinstance(raw, Mapping):
        raise SettingsError(None, "must be a JSON object", "not_an_object")
    for key in raw:
        if key not in KNOWN_KEYS:
            raise SettingsError(
                str(key),
                f"unknown option; known options: {', '.join(KNOWN_KEYS)}",
                "unknown_option",
            )
    return raw


def _strategy(raw: Mapping[str, Any]) -> Strategy:
    strategy_raw = raw.get("strategy")
    if strategy_raw is None:
        return Strategy.UUID
    if isinstance(strategy_raw, str) and strategy_raw in Strategy.__members__:
        return Strategy(strategy_raw)
    raise SettingsError(
        "strategy",
        f"unknown strategy {strategy_raw!r}; one of: {', '.join(s.value for s in Strategy)}",
        "unknown_strategy",
    )


def _ttl_minutes(raw: Mapping[str, Any], strategy: Strategy) -> int | None:
    ttl = raw.get("ttlMinutes")
    if ttl is None:
        if strategy in WINDOW_STRATEGIES:
            raise SettingsError("ttlMinutes", f"required by the {strategy} strategy", "required")
        return None
    if not isinstance(ttl, int) or isinstance(ttl, bool) or ttl <= 0:
        raise SettingsError("ttlMinutes", "must be a positive integer", "invalid_type")
    if ttl > MAX_TTL_MINUTES:
        raise SettingsError("ttlMinutes", f"must be at most {MAX_TTL_MINUTES}", "too_large")
    return ttl


def _context_fields(raw: Mapping[str, Any], strategy: Strategy) -> tuple[str, ...]:
    fields_raw = raw.get("contextFields")
    context_fields: tuple[str, ...] = ()
    if fields_raw is not None:
        if not isinstance(fields_raw, list):
            raise SettingsError("contextFields", "must be a list of strings", "invalid_type")
        if len(fields_raw) > MAX_CONTEXT_FIELDS:
            raise SettingsError("contextFields", f"at most {MAX_CONTEXT_FIELDS} fields", "too_long")
        for index, name in enumerate(fields_raw):
            _check_context_field(name, index, fields_raw[:index])
        context_fields = tuple(fields_raw)
    if strategy in CONTEXT_STRATEGIES and not context_fields:
        raise SettingsError(
            "contextFields",
            f"a non-empty list is required by the {strategy} strategy",
            "required",
        )
    return context_fields


def _check_context_field(name: Any, index: int, earlier: list[Any]) -> None:
    where = f"contextFields[{index}]"
    if not isinstance(name, str) or not name.strip():
        raise SettingsError(where, "must be a non-empty string", "invalid_type")
    if len(name) > MAX_CONTEXT_FIELD_LENGTH:
        raise SettingsError(where, f"at most {MAX_CONTEXT_FIELD_LENGTH} characters", "too_long")
    if name in earlier:
        raise SettingsError(where, f"duplicate field {name!r}", "duplicate")


def _custom_expression(raw: Mapping[str, Any], strategy: Strategy) -> str | None:
    expression = raw.get("customExpression")
    if expression is not None:
        if not isinstance(expression, str):
            raise SettingsError("customExpression", "must be a string", "invalid_type")
        if len(expression) > MAX_EXPRESSION_LENGTH:
            raise SettingsError(
                "customExpression", f"at most {MAX_EXPRESSION_LENGTH} characters", "too_long"
            )
    if strategy is Strategy.CUSTOM_EXPRESSION:
        if expression is None or not expression.strip():
            raise SettingsError(
                "customExpression", "required by the CUSTOM_EXPRESSION strategy", "required"
            )
        try:
            parse_template(expression)
        except ExpressionError as exc:
            raise SettingsError("customExpression", str(exc), "invalid_expression") from exc
    return expression
