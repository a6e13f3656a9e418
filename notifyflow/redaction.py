"""Masking of payload paths listed in ``NOTIFYFLOW_REDACT_PATHS``.

A path is dot-separated keys (``user.email``); a list on the way applies the rest of
the path to each element. Used wherever a payload is shown: step logs, the API, the
admin. The instance keeps the real value (templates need it).
"""

from __future__ import annotations

import copy
from typing import Any

from django.conf import settings

MASK = "[redacted]"


def redact_paths() -> list[list[str]]:
    return [p.split(".") for p in settings.NOTIFYFLOW_REDACT_PATHS if p]


def redact(payload: Any) -> Any:
    """A copy of ``payload`` with every configured path masked (``payload`` itself when
    nothing is configured)."""
    paths = redact_paths()
    if not paths or not isinstance(payload, (dict, list)):
        return payload
    masked = copy.deepcopy(payload)
    for path in paths:
        _mask(masked, path)
    return masked


def _mask(node: Any, path: list[str]) -> None:
    # Iterative: the payload's depth is bounded at the parser, but nothing here relies
    # on that.
    stack: list[tuple[Any, int]] = [(node, 0)]
    while stack:
        item, index = stack.pop()
        if isinstance(item, list):
            stack.extend((element, index) for element in item)
            continue
        if not isinstance(item, dict) or path[index] not in item:
            continue
        if index == len(path) - 1:
            item[path[index]] = MASK
        else:
            stack.append((item[path[index]], index + 1))
