"""A recipient id: the caller's own key for a person (their user id), and the segment of
every path that addresses that person (``/api/v1/recipients/{id}/`` and below). So an id
is refused where it is created - a body or a path of the API, the console's form - when
no path could address it:

- text that is not printable (``api.fields.printable_problem``: control and bidi
  characters, lone surrogates);
- a ``/`` (a path segment cannot hold one: ``%2F`` arrives decoded);
- a segment with a meaning of its own: ``bulk`` (``POST /api/v1/recipients/bulk/``),
  ``.`` and ``..`` (clients remove them from a path before sending it).
"""

from __future__ import annotations

from notifyflow.text import printable_problem

from .models import Recipient

MAX_RECIPIENT_ID_LENGTH = Recipient._meta.get_field("id").max_length or 255
# Path segments of /api/v1/recipients/ that are not a recipient's.
RESERVED_RECIPIENT_IDS = frozenset({"bulk", ".", ".."})


def recipient_id_problem(value: str) -> tuple[str, str] | None:
    """(code, problem) if ``value`` cannot be a recipient id (blank and length are the
    caller's field's to check), else None."""
    problem = printable_problem(value)
    if problem is not None:
        return problem
    if "/" in value:
        return "reserved_id", "must not contain / (no path could address the recipient)"
    if value in RESERVED_RECIPIENT_IDS:
        return (
            "reserved_id",
            f"{value!r} is reserved (/api/v1/recipients/{value}/ is not a recipient's path)",
        )
    return None
