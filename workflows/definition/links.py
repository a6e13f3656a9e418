"""URLs a template puts in front of a person (``in_app.url``: the front end makes it a
link): an ``http(s)`` URL with a host, or a relative reference on the customer's own
site (``/orders/42``, ``orders/42?tab=2``). Any other scheme - ``javascript:``,
``data:``, ``vbscript:``, ``file:`` ... - is refused: at save when the template's text
fixes it (``link_template_problem``), and as a permanent step failure naming node and
field when a rendered value holds one (``link_problem``, the ``in_app`` executor).

The text is also printable (``api.fields.printable_problem``): browsers drop tabs
and newlines from a URL, so ``java\\nscript:`` would be ``javascript:`` to them.
"""

from __future__ import annotations

import re

from notifyflow.text import printable_problem

ALLOWED_SCHEMES = ("http", "https")
# RFC 3986's scheme, at the start of the reference.
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
# After the scheme: "//" and a host (not a path, query or fragment at once).
_AUTHORITY = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/?#\\\s]")
_LIQUID = re.compile(r"\{\{|\{%")
EXPECTED = "must be an http(s) URL or a relative path"


def link_problem(url: str) -> str | None:
    """Why ``url`` (as rendered, surrounding whitespace dropped) may not be a person's
    link, or None; empty is no link, and fine."""
    text = url.strip()
    problem = printable_problem(text)
    if problem is not None:
        return problem[1]
    if not text:
        return None
    match = _SCHEME.match(text)
    if match is not None:
        scheme = match.group(1)
        if scheme.lower() not in ALLOWED_SCHEMES:
            return f"{EXPECTED} (not {scheme}:)"
        if not _AUTHORITY.match(text):
            return f"{EXPECTED}: {scheme}: needs //host"
        return None
    if text[:2].replace("\\", "/") == "//":
        return f"{EXPECTED}: //host (protocol-relative) leaves the site; write https://host"
    if ":" in re.split(r"[/?#]", text, maxsplit=1)[0]:
        return f"{EXPECTED}: a relative path's first segment cannot hold ':'"
    return None


def link_template_problem(template: str) -> str | None:
    """Why a template of a person's link is refused at save, or None: its text when it
    has no Liquid in it; else the scheme its literal start already fixes
    (``javascript:{{ payload.code }}``). The rest is checked when it renders."""
    start = _LIQUID.search(template)
    if start is None:
        return link_problem(template)
    literal = template[: start.start()].lstrip()
    problem = printable_problem(literal)
    if problem is not None:
        return problem[1]
    match = _SCHEME.match(literal)
    if match is not None and match.group(1).lower() not in ALLOWED_SCHEMES:
        return f"{EXPECTED} (not {match.group(1)}:)"
    return None
