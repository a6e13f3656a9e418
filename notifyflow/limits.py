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
    is safe on any input). Level by level, only containers kept: a 1,000-item bulk body
    has ~10,000 values and ~2,000 containers."""
    level: list[Any] = [value] if isinstance(value, _CONTAINERS) else []
    depth = 1
    while level:
        if depth > limit:
            return True
        below: list[Any] = []
        for item in level:
            children: Iterable[Any] = item.values() if isinstance(item, dict) else item
            below.extend([child for child in children if isinstance(child, _CONTAINERS)])
        level = below
        depth += 1
    return False


_CONTAINERS = (dict, list, tuple)
