"""Delay durations: ``"90s"``, ``"15m"``, ``"1h30m"``, ``"1d"``, ISO-8601 ``"PT15M"``."""

from __future__ import annotations

import re
from datetime import timedelta

# The longest delay, wait or timeout a definition may ask for. Anything longer is a
# mistake, and unbounded numbers overflow timedelta (or the datetime they are added to).
MAX_DURATION = timedelta(days=3650)
MAX_DURATION_MS = int(MAX_DURATION.total_seconds() * 1000)

_COMPACT = re.compile(r"^(?:(?P<d>\d+)d)?(?:(?P<h>\d+)h)?(?:(?P<m>\d+)m)?(?:(?P<s>\d+)s)?$")
_ISO = re.compile(
    r"^P(?:(?P<w>\d+)W)?(?:(?P<d>\d+)D)?"
    r"(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$"
)


def duration_pattern() -> str:
    """The two forms as one regular expression without named groups (JSON Schema's
    ``pattern`` dialect); ``parse_duration`` also checks the upper bound."""
    forms = [re.sub(r"\?P<\w+>", "", p.pattern)[1:-1] for p in (_COMPACT, _ISO)]
    return "^(?:" + "|".join(forms) + ")$"


def parse_duration(text: str) -> timedelta:
    """Parse a duration of at most ``MAX_DURATION``; raise ValueError with a readable
    message if it is not one."""
    if not isinstance(text, str):
        raise ValueError('must be a string such as "90s", "1h30m" or "PT15M"')
    shown = repr(text) if len(text) <= 40 else repr(text[:40] + "…")
    seconds = _seconds(text.strip()) if len(text) <= 100 else None
    if seconds is None:
        raise ValueError(f'{shown} is not a duration such as "90s", "1h30m", "1d" or "PT15M"')
    # Compared as a number, before timedelta (which overflows past 999,999,999 days).
    if seconds > MAX_DURATION.total_seconds():
        raise ValueError(f"{shown} is longer than the maximum of {MAX_DURATION.days} days")
    return timedelta(seconds=seconds)


def _seconds(value: str) -> float | None:
    match = _COMPACT.match(value.lower())
    if value and match and any(match.groupdict().values()):
        n = {k: int(v or 0) for k, v in match.groupdict().items()}
        return n["d"] * 86400 + n["h"] * 3600 + n["m"] * 60 + n["s"]
    match = _ISO.match(value.upper())
    if value and match and any(match.groupdict().values()) and not value.upper().endswith("T"):
        g = match.groupdict()
        whole = (
            int(g["w"] or 0) * 7 * 86400
            + int(g["d"] or 0) * 86400
            + int(g["h"] or 0) * 3600
            + int(g["m"] or 0) * 60
        )
        if whole > MAX_DURATION.total_seconds():
            return whole
        return whole + float(g["s"] or 0)
    return None
