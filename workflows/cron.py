"""Cron schedules (a ``batch`` node's ``schedule``, docs/workflows.md#batch): the
standard five fields ``minute hour day-of-month month day-of-week`` - ``*``, numbers,
ranges ``1-5``, steps ``*/15`` and ``0-30/10``, lists ``9,17``, names ``jan``..``dec``
and ``sun``..``sat`` (day-of-week 0 or 7 is Sunday). When both day fields are
restricted a day matches if either does, as in Vixie cron.

Each field is parsed by celery's ``crontab_parser`` (celery is already a dependency,
and it knows ranges, steps, lists and names); the next time is computed here, in local
wall time, and converted with zoneinfo so a 09:00 schedule is at 09:00 local on both
sides of a DST change. A local time skipped by a change (02:30 on a spring-forward
day) fires at the first valid instant after it (03:00 new time); a local time that
happens twice (fall-back) fires once, at its first occurrence.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from celery.schedules import ParseException, crontab_parser

# How far ahead the next time is looked for: past any leap day (29 Feb on a Monday
# needs up to 28 years; "either day field" makes that rare), a schedule that never
# fires (30 Feb) is refused at save.
SEARCH_YEARS = 28


class CronError(ValueError):
    """An expression that is not a valid five-field cron schedule (the message says why)."""


@dataclass(frozen=True)
class Cron:
    """A parsed expression: the allowed values of each field (day-of-week 0 = Sunday)."""

    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    # Whether the day fields were restricted ("*" is not): both -> either matches.
    days_restricted: bool
    weekdays_restricted: bool

    def matches_day(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        in_days = day.day in self.days
        in_weekdays = (day.weekday() + 1) % 7 in self.weekdays
        if self.days_restricted and self.weekdays_restricted:
            return in_days or in_weekdays
        return in_days and in_weekdays


# (name, max_ + 1 exclusive bound as crontab_parser takes it, min_)
_NAMED = ("month", "day-of-week")
_FIELDS = (("minute", 60, 0), ("hour", 24, 0), ("day-of-month", 31, 1), ("month", 12, 1))


def parse_cron(expression: str) -> Cron:
    """The schedule ``expression`` means; ``CronError`` naming the bad field if any."""
    if not isinstance(expression, str):
        raise CronError("must be a string of five fields")
    parts = expression.split()
    if len(parts) != 5:
        raise CronError(
            f"has {len(parts)} fields, expected 5: minute hour day-of-month month day-of-week"
        )
    values = [
        _parse_field(part, name, crontab_parser(bound, min_))
        for part, (name, bound, min_) in zip(parts, _FIELDS, strict=False)
    ]
    # 0-7 so that 7 (Sunday, as most crons accept) parses; folded onto 0 below.
    weekdays = _parse_field(parts[4], "day-of-week", crontab_parser(8))
    return Cron(
        minutes=tuple(sorted(values[0])),
        hours=tuple(sorted(values[1])),
        days=frozenset(values[2]),
        months=frozenset(values[3]),
        weekdays=frozenset(d % 7 for d in weekdays),
        days_restricted=parts[2] != "*",
        weekdays_restricted=parts[4] != "*",
    )


def _parse_field(part: str, name: str, parser: crontab_parser) -> set[int]:
    if any(c.isalpha() for c in part) and name not in _NAMED:
        raise CronError(f"{name} field {part!r}: names are allowed in month and day-of-week")
    try:
        found = parser.parse(part.lower())
    except (ParseException, ValueError, KeyError) as exc:
        reason = "unknown name" if "literal" in str(exc) else str(exc)
        raise CronError(f"{name} field {part!r}: {reason}") from None
    if not found:
        raise CronError(f"{name} field {part!r} allows no value")
    return set(found)


def next_fire(cron: Cron, *, after: datetime, zone: ZoneInfo) -> datetime | None:
    """The first time strictly after ``after`` (aware) that ``cron`` names in ``zone``,
    in UTC; None if there is none within ``SEARCH_YEARS``."""
    local = after.astimezone(zone)
    day = local.date()
    last = day + timedelta(days=366 * SEARCH_YEARS)
    while day <= last:
        if cron.matches_day(day):
            for hour in cron.hours:
                for minute in cron.minutes:
                    at = _instant(datetime.combine(day, time(hour, minute)), zone)
                    if at > after:
                        return at
        day += timedelta(days=1)
    return None


def _instant(wall: datetime, zone: ZoneInfo) -> datetime:
    """The UTC instant of local ``wall`` time: its first occurrence when it happens twice
    (fold 0), the first valid minute after it when the clocks skipped it."""
    while True:
        at = wall.replace(tzinfo=zone).astimezone(UTC)
        if at.astimezone(zone).replace(tzinfo=None) == wall:
            return at
        wall += timedelta(minutes=1)
