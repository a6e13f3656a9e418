"""Picks the key generator for a settings object; falls back to UUID for bad rows."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from .config import IdempotencySettings, SettingsError, Strategy
from .generators import (
    ContextKeyGenerator,
    ContextTimeWindowKeyGenerator,
    EventKeyGenerator,
    ExpressionKeyGenerator,
    KeyGenerator,
    RandomKeyGenerator,
    TimeWindowKeyGenerator,
)

logger = logging.getLogger("notifyflow.idempotency")

_GENERATORS: dict[Strategy, type] = {
    Strategy.NONE: RandomKeyGenerator,
    Strategy.UUID: RandomKeyGenerator,
    Strategy.TIME_WINDOW: TimeWindowKeyGenerator,
    Strategy.CONTEXT_BASED: ContextKeyGenerator,
    Strategy.CONTEXT_TIME_WINDOW: ContextTimeWindowKeyGenerator,
    Strategy.EVENT_BASED: EventKeyGenerator,
    Strategy.CUSTOM_EXPRESSION: ExpressionKeyGenerator,
}


@dataclass(frozen=True)
class ResolvedSettings:
    settings: IdempotencySettings
    #: Why the stored value was not used (it was invalid), or None.
    fallback_reason: str | None = None


def resolve_settings(raw: Any, *, label: str = "") -> ResolvedSettings:
    """Settings to run with. No settings → UUID. Settings that are invalid anyway
    (a row written by hand, invalid JSON) → UUID, with a warning logged; saving through
    the API or the admin never stores such a row."""
    if isinstance(raw, IdempotencySettings):
        return ResolvedSettings(raw)
    try:
        return ResolvedSettings(IdempotencySettings.parse(raw))
    except SettingsError as exc:
        logger.warning(
            "invalid idempotency_setting%s (%s); falling back to UUID",
            f" on {label}" if label else "",
            exc,
        )
        return ResolvedSettings(
            IdempotencySettings(), f"invalid idempotency_setting ({exc}); used UUID"
        )


def generator_for(settings: IdempotencySettings | Any, *, label: str = "") -> KeyGenerator:
    """The generator for ``settings``; raw (unparsed) values go through resolve_settings."""
    resolved = resolve_settings(settings, label=label)
    return _GENERATORS[resolved.settings.strategy](resolved.settings)
