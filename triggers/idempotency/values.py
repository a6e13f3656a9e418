"""How a value becomes text inside an idempotency key (shared by every generator)."""

from __future__ import annotations

import json
from typing import Any

MISSING_TEXT = "null"


class UnrenderableValueError(ValueError):
    """A context value that cannot be rendered (too deeply nested, circular)."""


def render_value(value: Any) -> str:
    """Strings as they are; None as ``null``; booleans and numbers as JSON writes them
    (``true``, ``1``, ``2.5``); objects and lists as compact JSON with sorted keys, so the
    same data always renders the same text. Raises UnrenderableValueError."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(
            value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
        )
    except (ValueError, TypeError, RecursionError) as exc:
        raise UnrenderableValueError(f"cannot render value: {exc}") from exc
