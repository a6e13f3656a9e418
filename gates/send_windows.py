"""Send windows and quiet hours of the email and SMS nodes: when a send is allowed.

Pure functions, no database. A node's ``send_window`` ``{days, from, until, timezone}``
allows sends on those local weekdays from ``from`` (inclusive) to ``until`` (exclusive);
``until <= from`` wraps midnight, and the day is the day the window opened. The
recipient's ``quiet_hours`` ``{from, until}`` forbid sends (wrapping midnight the same
way) unless the workflow is critical. Local times are resolved in a timezone: one that
does not exist that day (a DST gap) is the next valid minute, an ambiguous one (a DST
overlap) its first occurrence.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from typing import Any, TypeGuard
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
RECIPIENT = "recipient"
# How far ahead the allowed intervals are laid out: a window on one weekday reopens
# within 7 days; one more day on each side covers windows wrapping midnight.
HORIZON_DAYS = 9
_MAX_STEPS = 200

Interval = tuple[datetime, datetime]


def zone(name: str | None) -> ZoneInfo | None:
    """The IANA timezone ``name``, or None for no name or one zoneinfo does not know."""
    if not name or not isinstance(name, str):
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a directory's name
        return None


def window_zone(send_window: Mapping[str, Any], recipient_timezone: str | None) -> tzinfo:
    """The send window's timezone: the recipient's for ``"recipient"``, else the IANA name;
    UTC when that is missing or unknown."""
    name = send_window.get("timezone")
    found = zone(recipient_timezone) if name == RECIPIENT else zone(name)
    return found or UTC


def quiet_zone(send_window: Mapping[str, Any] | None, recipient_timezone: str | None) -> tzinfo:
    """Quiet hours' timezone: the recipient's; without one (or an unknown one), the send
    window's IANA timezone; else UTC."""
    window_name = (send_window or {}).get("timezone")
    fallback = zone(window_name) if window_name != RECIPIENT else None
    return zone(recipient_timezone) or fallback or UTC


def parse_hhmm(text: str) -> time:
    hours, minutes = text.split(":")
    return time(int(hours), int(minutes))


def local_instant(day: date, at: time, tz: tzinfo) -> datetime:
    """``day`` at local time ``at`` in ``tz`` as an aware UTC instant: a local time that
    does not exist (a DST gap) moves to the next minute that does; an ambiguous one is its
    first occurrence (fold 0)."""
    wall = datetime.combine(day, at)
    for _ in range(24 * 60):
        candidate = wall.replace(tzinfo=tz, fold=0)
        instant = candidate.astimezone(UTC)
        if instant.astimezone(tz).replace(tzinfo=None) == wall:
            return instant
        wall += timedelta(minutes=1)
    raise ValueError(f"no valid local time after {day} {at} in {tz}")  # pragma: no cover


def _intervals(
    start: datetime, tz: tzinfo, opens: time, closes: time, days: frozenset[int]
) -> Iterator[Interval]:
    """The daily intervals [opens, closes) in ``tz`` on ``days`` (weekday numbers), from
    the local day before ``start`` over the horizon, in order."""
    first = start.astimezone(tz).date() - timedelta(days=1)
    wraps = closes <= opens
    for offset in range(HORIZON_DAYS):
        day = first + timedelta(days=offset)
        if day.weekday() not in days:
            continue
        end_day = day + timedelta(days=1) if wraps else day
        yield local_instant(day, opens, tz), local_instant(end_day, closes, tz)


def _window_intervals(
    now: datetime, send_window: Mapping[str, Any], recipient_timezone: str | None
) -> list[Interval]:
    days = frozenset(DAYS.index(d) for d in send_window.get("days", DAYS) if d in DAYS)
    tz = window_zone(send_window, recipient_timezone)
    opens, closes = parse_hhmm(send_window["from"]), parse_hhmm(send_window["until"])
    return list(_intervals(now, tz, opens, closes, days))


def _quiet_intervals(
    now: datetime,
    quiet_hours: Mapping[str, Any],
    send_window: Mapping[str, Any] | None,
    recipient_timezone: str | None,
) -> list[Interval]:
    opens, closes = parse_hhmm(quiet_hours["from"]), parse_hhmm(quiet_hours["until"])
    if opens == closes:  # an empty interval, not a whole day
        return []
    tz = quiet_zone(send_window, recipient_timezone)
    return list(_intervals(now, tz, opens, closes, frozenset(range(7))))


def _containing(at: datetime, intervals: list[Interval]) -> Interval | None:
    return next((i for i in intervals if i[0] <= at < i[1]), None)


def _earliest(
    at: datetime, allowed: list[Interval] | None, quiet: list[Interval]
) -> datetime | None:
    """The earliest instant >= ``at`` inside one of ``allowed`` (None: any time) and
    outside every quiet interval; None if there is none within the horizon."""
    for _ in range(_MAX_STEPS):
        if allowed is not None and _containing(at, allowed) is None:
            upcoming = [start for start, _end in allowed if start > at]
            if not upcoming:
                return None
            at = min(upcoming)
        blocked = _containing(at, quiet)
        if blocked is None:
            return at
        at = blocked[1]
    return None  # pragma: no cover


def _is_active(rule: Mapping[str, Any] | None) -> TypeGuard[Mapping[str, Any]]:
    """Whether a window or quiet hours are set (a rule without from and until is not)."""
    return rule is not None and bool(rule.get("from")) and bool(rule.get("until"))


def next_send_time(
    *,
    now: datetime,
    send_window: Mapping[str, Any] | None,
    quiet_hours: Mapping[str, Any] | None,
    recipient_timezone: str | None,
    ignore_quiet_hours: bool,
) -> datetime:
    """``now`` if a send is allowed now, else the earliest instant after it allowed by the
    send window and (unless ``ignore_quiet_hours``: critical workflows) the quiet hours.

    Quiet hours that leave no time inside the send window (within the horizon) give way
    to it: the workflow's own window is honoured, the preference cannot be.
    """
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    window = send_window if _is_active(send_window) else None
    allowed = _window_intervals(now, window, recipient_timezone) if window else None
    quiet: list[Interval] = []
    if _is_active(quiet_hours) and not ignore_quiet_hours:
        quiet = _quiet_intervals(now, quiet_hours, window, recipient_timezone)
    found = _earliest(now, allowed, quiet) or _earliest(now, allowed, [])
    if found is None:  # a window with no days: validation refuses it
        return now
    return now if found == now else found.astimezone(now.tzinfo)


def _zone_name(tz: tzinfo) -> str:
    return getattr(tz, "key", None) or "UTC"


def days_label(days: list[str] | tuple[str, ...]) -> str:
    """``["mon", ..., "fri"]`` → ``"mon-fri"``; days that are not a run: ``"mon,wed"``."""
    numbers = sorted(DAYS.index(d) for d in set(days) if d in DAYS)
    if len(numbers) > 2 and numbers == list(range(numbers[0], numbers[-1] + 1)):
        return f"{DAYS[numbers[0]]}-{DAYS[numbers[-1]]}"
    return ",".join(DAYS[n] for n in numbers)


def deferral_reason(
    *,
    now: datetime,
    send_window: Mapping[str, Any] | None,
    quiet_hours: Mapping[str, Any] | None,
    recipient_timezone: str | None,
    ignore_quiet_hours: bool,
) -> str | None:
    """Why a send is not allowed at ``now``, for the step's output ("outside send window
    mon-fri 09:00-17:00 Europe/Paris", "quiet hours 22:00-07:00 America/New_York"); None
    when it is allowed."""
    window = send_window if _is_active(send_window) else None
    if window and _containing(now, _window_intervals(now, window, recipient_timezone)) is None:
        tz = _zone_name(window_zone(window, recipient_timezone))
        label = days_label(window.get("days", DAYS))
        return f"outside send window {label} {window['from']}-{window['until']} {tz}"
    if _is_active(quiet_hours) and not ignore_quiet_hours:
        quiet = _quiet_intervals(now, quiet_hours, window, recipient_timezone)
        if _containing(now, quiet) is not None:
            tz = _zone_name(quiet_zone(window, recipient_timezone))
            return f"quiet hours {quiet_hours['from']}-{quiet_hours['until']} {tz}"
    return None


def expired(
    *, reached_at: datetime | None, expires_after: timedelta | None, send_at: datetime
) -> bool:
    """Whether a send deferred to ``send_at`` would come past ``expires_after`` counted
    from when the node was reached (then the node is skipped with ``expired``)."""
    if expires_after is None or reached_at is None:
        return False
    return send_at > reached_at + expires_after
