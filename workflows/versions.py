"""A definition as text, and the difference between two: what ``workflows diff``,
``sync``'s results, the versions API and the console show. The text is the normalised
definition (what the validator keeps), keys sorted, two-space indents, so the same
definition always reads the same and a diff shows only what changed."""

from __future__ import annotations

import difflib
import json
from typing import Any


def definition_text(definition: Any) -> str:
    """The definition as stable JSON text, ending in a newline."""
    return json.dumps(definition, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def definition_diff(old: Any, new: Any, *, old_label: str, new_label: str) -> str:
    """A unified diff of two definitions' texts ("" when they are equal)."""
    return "".join(
        difflib.unified_diff(
            definition_text(old).splitlines(keepends=True),
            definition_text(new).splitlines(keepends=True),
            fromfile=old_label,
            tofile=new_label,
        )
    )


__all__ = ["definition_diff", "definition_text"]
