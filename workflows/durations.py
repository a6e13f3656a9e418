"""Delay durations: ``"90s"``, ``"15m"``, ``"1h30m"``, ``"1d"``, ISO-8601 ``"PT15M"``."""

from __future__ import annotations

import re
from datetime import timedelta

_COMPACT = re.compile(r"^(?:(?P<d>\d+)d)?(?:(?P<h>\d+)h)?(?:(?P<m>\d+)m)?(?:(?P<s>\d+)s)?$")
_ISO = re.compile(
    r"^P(?:(?P<w>\d+)W)?(?:(?P<d>\d+)D)?"
    r"(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$"
)


def parse_duration(text: str) -> timedelta:
    """Parse a duration; raise ValueError with a readable message if it is not one."""
    if not isinstance(text, str):
        raise ValueError('must be a string such as "90s", "1h30m" or "PT15M"')
    value = text.strip()
    match = _COMPACT.match(value.lower())
    if value and match and any(match.groupdict().values()):
        parts = {k: int(v or 0) for k, v in match.groupdict().items()}
        return timedelta(days=parts["d"], hours=parts["h"], minutes=parts["m"], seconds=parts["s"])
    match = _ISO.match(value.upper())
    if value and match and any(match.groupdict().values()) and not value.upper().endswith("T"):
        g = match.groupdict()
        return timedelta(
            weeks=int(g["w"] or 0),
            days=int(g["d"] or 0),
            hours=int(g["h"] or 0),
            minutes=int(g["m"] or 0),
            seconds=float(g["s"] or 0),
        )
    raise ValueError(f'{text!r} is not a duration such as "90s", "1h30m", "1d" or "PT15M"')
