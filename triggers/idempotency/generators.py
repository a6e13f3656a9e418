"""Key generators: one small interface, one implementation per family of strategies.

Formats (``trigger_{id}_`` is dropped when ``includeTriggerId`` is false):

- NONE, UUID:          ``trigger_{id}_{uuid4}`` — a fresh uuid4 each time, never a repeat
- TIME_WINDOW:         ``trigger_{id}_{windowStartMs}``
- CONTEXT_BASED:       ``trigger_{id}_userId_{v}_packageId_{v}``
- CONTEXT_TIME_WINDOW: ``trigger_{id}_userId_{v}_{windowStartMs}``
- EVENT_BASED:         ``trigger_{id}_eventType_{name}_eventId_{id}`` (each part only when
  its include flag is on)
- CUSTOM_EXPRESSION:   whatever the ``#{...}`` template renders (no prefix added)

Windows are ``ttlMinutes`` long and aligned to the Unix epoch in UTC; ``windowStartMs``
is the window's start in epoch milliseconds. Keys over 255 characters keep a readable
prefix and end in the sha256 of the full key.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from .config import IdempotencySettings
from .expression import ExpressionError, MissingValueError, parse_template
from .values import MISSING_TEXT, UnrenderableValueError, render_value

MAX_KEY_LENGTH = 255
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)


class KeyGenerationError(Exception):
    """This binding cannot produce a key for this event; the binding is skipped.

    ``code`` is stable (``missing_context``, ``missing_event_id``, ``expression_error``,
    ``unrenderable_value``); ``field`` names what is missing (``context.userId``)."""

    def __init__(self, *, code: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.field = code, message, field


class KeyGenerator(Protocol):
    def generate(
        self,
        *,
        trigger_id: int | None,
        event_name: str,
        event_id: str | None,
        context: Mapping[str, Any],
        at: datetime,
    ) -> str: ...


def window_start_ms(at: datetime, ttl_minutes: int) -> int:
    """Start of the ``ttl_minutes`` window holding ``at``, in Unix epoch milliseconds.

    Windows align to the epoch in UTC (9:23 is in the 9:15 window of a 15-minute TTL).
    A naive ``at`` is taken as UTC. Integer arithmetic, so no float rounding at edges.
    """
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    epoch_ms = (at - _EPOCH) // _ONE_MS
    window_ms = ttl_minutes * 60_000
    return epoch_ms - epoch_ms % window_ms


def cap_key(key: str) -> str:
    """Keys longer than 255 characters become ``<first 183 chars>_sha256_<hex>``."""
    if len(key) <= MAX_KEY_LENGTH:
        return key
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{key[: MAX_KEY_LENGTH - 72]}_sha256_{digest}"


class _Base:
    def __init__(self, settings: IdempotencySettings) -> None:
        self.settings = settings

    def _prefixed(self, trigger_id: int | None, parts: list[str]) -> str:
        if self.settings.include_trigger_id:
            parts = ["trigger", str(trigger_id), *parts]
        return cap_key("_".join(parts))

    def _render(self, value: Any, field: str) -> str:
        try:
            return render_value(value)
        except UnrenderableValueError as exc:
            raise KeyGenerationError(
                code="unrenderable_value", field=field, message=f"{field}: {exc}"
            ) from exc

    def _context_parts(self, context: Mapping[str, Any]) -> list[str]:
        parts: list[str] = []
        for name in self.settings.context_fields:
            value = context.get(name) if isinstance(context, Mapping) else None
            if value is None:
                if self.settings.fail_on_missing_context:
                    raise KeyGenerationError(
                        code="missing_context",
                        field=f"context.{name}",
                        message=f"context field {name!r} is missing and the binding has "
                        "failOnMissingContext",
                    )
                parts += [name, MISSING_TEXT]
            else:
                parts += [name, self._render(value, f"context.{name}")]
        return parts


class RandomKeyGenerator(_Base):
    """NONE and UUID: a fresh uuid4 every time, so nothing is ever deduplicated."""

    def generate(
        self,
        *,
        trigger_id: int | None,
        event_name: str,
        event_id: str | None,
        context: Mapping[str, Any],
        at: datetime,
    ) -> str:
        return self._prefixed(trigger_id, [str(uuid.uuid4())])


class TimeWindowKeyGenerator(_Base):
    def generate(
        self,
        *,
        trigger_id: int | None,
        event_name: str,
        event_id: str | None,
        context: Mapping[str, Any],
        at: datetime,
    ) -> str:
        assert self.settings.ttl_minutes is not None
        return self._prefixed(trigger_id, [str(window_start_ms(at, self.settings.ttl_minutes))])


class ContextKeyGenerator(_Base):
    def generate(
        self,
        *,
        trigger_id: int | None,
        event_name: str,
        event_id: str | None,
        context: Mapping[str, Any],
        at: datetime,
    ) -> str:
        return self._prefixed(trigger_id, self._context_parts(context))


class ContextTimeWindowKeyGenerator(_Base):
    def generate(
        self,
        *,
        trigger_id: int | None,
        event_name: str,
        event_id: str | None,
        context: Mapping[str, Any],
        at: datetime,
    ) -> str:
        assert self.settings.ttl_minutes is not None
        parts = self._context_parts(context)
        parts.append(str(window_start_ms(at, self.settings.ttl_minutes)))
        return self._prefixed(trigger_id, parts)


class EventKeyGenerator(_Base):
    def generate(
        self,
        *,
        trigger_id: int | None,
        event_name: str,
        event_id: str | None,
        context: Mapping[str, Any],
        at: datetime,
    ) -> str:
        parts: list[str] = []
        if self.settings.include_event_type:
            parts += ["eventType", event_name]
        if self.settings.include_event_id:
            # Never "null": every id-less event would then share one key forever.
            if not event_id:
                raise KeyGenerationError(
                    code="missing_event_id",
                    field="event_id",
                    message="event_id is required: this binding's key includes the event id",
                )
            parts += ["eventId", event_id]
        return self._prefixed(trigger_id, parts)


class ExpressionKeyGenerator(_Base):
    def __init__(self, settings: IdempotencySettings) -> None:
        super().__init__(settings)
        try:
            self.template = parse_template(settings.custom_expression)
        except ExpressionError as exc:
            raise KeyGenerationError(
                code="expression_error",
                field="customExpression",
                message=f"customExpression: {exc}",
            ) from exc

    def generate(
        self,
        *,
        trigger_id: int | None,
        event_name: str,
        event_id: str | None,
        context: Mapping[str, Any],
        at: datetime,
    ) -> str:
        try:
            key = self.template.render(
                trigger_id=trigger_id,
                event_name=event_name,
                event_id=event_id,
                context=context,
                fail_on_missing=self.settings.fail_on_missing_context,
            )
        except MissingValueError as exc:
            raise KeyGenerationError(
                code="missing_context",
                field=_field_of(exc.source),
                message=f"{exc} and the binding has failOnMissingContext",
            ) from exc
        except ExpressionError as exc:
            raise KeyGenerationError(
                code="expression_error",
                field="customExpression",
                message=f"customExpression: {exc}",
            ) from exc
        return cap_key(key)


def _field_of(source: str) -> str:
    if source == "eventId":
        return "event_id"
    if source.startswith("ctx"):
        return "context" + source[3:]
    return source
