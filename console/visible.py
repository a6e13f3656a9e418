"""Ids as the console shows them: whitespace and control characters made visible.

Recipient ids, idempotency keys, list keys, batch and throttle keys, event ids are the
caller's strings: ``a b``, ``a\\nb`` and ``a b `` would look the same on a page (HTML folds
whitespace, a newline renders as a space, U+202E reverses what follows). Every id the
console shows as text, in a title or in a link goes through ``visible_id`` (HTML; the
template filter of the same name for a page's subtitle and breadcrumbs) or
``visible_text`` (plain text, for a ``title`` attribute):

- a control, format or separator character, or a space other than U+0020 (no-break,
  thin ...), is written as its escape, ``\\n``, ``\\t``, ``\\r``, ``\\x00``, ``\\xa0``,
  ``\\u202e``, in a styled ``nf-esc`` span naming its code point;
- a space that would not be seen - leading, trailing, or in a run of two or more - is a
  middle dot ``·`` in a styled ``nf-sp`` span (a single space between two words stays a
  space: it is seen);
- anything else is the text itself, HTML-escaped.

The styles are in console.css.
"""

from __future__ import annotations

import unicodedata

from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

SPACE_MARK = "·"
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
# Unicode categories written as escapes: controls, format characters (bidi overrides,
# zero-width spaces), line and paragraph separators, surrogates, private use, unassigned.
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})


def _escape_of(char: str) -> str | None:
    """The escape ``char`` is shown as, or None when it is shown as itself."""
    if char in _NAMED:
        return _NAMED[char]
    category = unicodedata.category(char)
    if category not in _ESCAPED_CATEGORIES and (category != "Zs" or char == " "):
        return None
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _hidden_spaces(text: str) -> set[int]:
    """Positions of the spaces nobody would see: leading, trailing, or in a run."""
    hidden: set[int] = set()
    start = 0
    while start < len(text):
        if text[start] != " ":
            start += 1
            continue
        end = start
        while end < len(text) and text[end] == " ":
            end += 1
        if start == 0 or end == len(text) or end - start > 1:
            hidden.update(range(start, end))
        start = end
    return hidden


def _pieces(text: str) -> list[tuple[str, str]]:
    """``text`` as (kind, shown) pieces: kind ``""`` (itself), ``"esc"`` or ``"sp"``."""
    hidden = _hidden_spaces(text)
    pieces: list[tuple[str, str]] = []
    for index, char in enumerate(text):
        escaped = _escape_of(char)
        if escaped is not None:
            pieces.append(("esc", escaped))
            continue
        kind, shown = ("sp", SPACE_MARK) if index in hidden else ("", char)
        if pieces and pieces[-1][0] == kind:
            pieces[-1] = (kind, pieces[-1][1] + shown)
        else:
            pieces.append((kind, shown))
    return pieces


def _code_point(escaped: str) -> str:
    if escaped in ("\\n", "\\t", "\\r"):
        return {"\\n": "U+000A line feed", "\\t": "U+0009 tab", "\\r": "U+000D return"}[escaped]
    char = chr(int(escaped[2:], 16))
    return f"U+{ord(char):04X} {unicodedata.name(char, 'control character').lower()}"


def visible_text(value: object) -> str:
    """``value`` as plain text with its hidden characters shown (for a title)."""
    return "".join(shown for _, shown in _pieces(str(value)))


def _html(text: str) -> str:
    html = []
    for kind, piece in _pieces(text):
        if kind == "esc":
            html.append(
                format_html('<span class="nf-esc" title="{}">{}</span>', _code_point(piece), piece)
            )
        elif kind == "sp":
            spaces = "a space" if len(piece) == 1 else f"{len(piece)} spaces"
            html.append(format_html('<span class="nf-sp" title="{}">{}</span>', spaces, piece))
        else:
            html.append(escape(piece))
    return "".join(html)


def visible_id(value: object, *, limit: int | None = None, empty: str = "-") -> SafeString:
    """``value`` as HTML with its hidden characters shown; ``empty`` for an empty one.
    With ``limit``, cut to that many characters (…) in two lines at most, the whole of
    it the title."""
    text = "" if value is None else str(value)
    if not text:
        return format_html("{}", empty)
    if limit is not None and len(text) > limit:
        return format_html(
            '<span class="nf-id nf-trunc" title="{}">{}…</span>',
            visible_text(text),
            # Safe: _html escapes every piece, or builds it with format_html.
            mark_safe(_html(text[: limit - 1])),
        )
    return mark_safe(_html(text))
