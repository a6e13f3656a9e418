"""Structural limits on JSON values, shared by the API parser and every validator."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# Deeper JSON is refused at the parser (400) and in definitions: far more than any real
# payload needs, and far below what recursive code (json, copy, templates, the admin's
# pretty-printer) survives.
MAX_JSON_DEPTH = 64


def json_depth_exceeds(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when ``value`` nests lists/objects more than ``limit`` deep (iterative, so it
    is safe on any input)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children: Iterable[Any]
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False
