"""The request-rate syntax (DRF's): requests per second, minute, hour or day, "50/s" or
"3000/min". Its own module so the settings can check NOTIFYFLOW_THROTTLE_RATE with it."""

from __future__ import annotations

import re

RATE_RE = re.compile(r"^[1-9][0-9]{0,8}/(s|secs?|seconds?|m|mins?|minutes?|h|hours?|d|days?)$")
RATE_EXAMPLES = "e.g. 50/s, 3000/min, 100000/day"


def is_rate(value: str) -> bool:
    return bool(RATE_RE.match(value))
