"""Cron schedules: the five fields (ranges, steps, lists, names), the next time in a
timezone, DST-correct on both sides of a change, a skipped local time and a repeated
one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from workflows.cron import CronError, next_fire, parse_cron

PARIS = ZoneInfo("Europe/Paris")
NEW_YORK = ZoneInfo("America/New_York")


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


def local(zone: ZoneInfo, *parts: int) -> datetime:
    return datetime(*parts, tzinfo=zone)


def after(expression: str, when: datetime, zone: ZoneInfo = PARIS) -> datetime | None:
    return next_fire(parse_cron(expression), after=when, zone=zone)


def test_fields_take_ranges_steps_lists_and_names():
    cron = parse_cron("*/15 9,17 1-10/3 jan-mar MON-fri")
    assert cron.minutes == (0, 15, 30, 45)
    assert cron.hours == (9, 17)
    assert cron.days == {1, 4, 7, 10}
    assert cron.months == {1, 2, 3}
    assert cron.weekdays == {1, 2, 3, 4, 5}


def test_sunday_is_0_or_7():
    assert parse_cron("0 9 * * 7").weekdays == parse_cron("0 9 * * sun").weekdays == {0}
    assert parse_cron("0 9 * * 5-7").weekdays == {5, 6, 0}


@pytest.mark.parametrize(
    ("expression", "named"),
    [
        ("0 9 * *", "5"),
        ("0 9 * * * *", "5"),
        ("60 9 * * *", "minute"),
        ("0 24 * * *", "hour"),
        ("0 9 0 * *", "day-of-month"),
        ("0 9 * 13 *", "month"),
        ("0 9 * * 8", "day-of-week"),
        ("*/0 9 * * *", "minute"),
        ("0 nine * * *", "hour"),
        ("0 9 * foo *", "month"),
        ("0 9 1,,2 * *", "day-of-month"),
    ],
)
def test_an_invalid_expression_is_refused_naming_the_field(expression, named):
    with pytest.raises(CronError, match=named):
        parse_cron(expression)


def test_the_next_time_is_strictly_after():
    at_nine = local(PARIS, 2026, 6, 1, 9, 0)
    assert after("0 9 * * *", at_nine) == local(PARIS, 2026, 6, 2, 9, 0)
    assert after("0 9 * * *", local(PARIS, 2026, 6, 1, 8, 59)) == at_nine


def test_a_weekday_rule_skips_the_weekend():
    friday_noon = local(PARIS, 2026, 6, 5, 12, 0)
    assert after("0 9 * * 1-5", friday_noon) == local(PARIS, 2026, 6, 8, 9, 0)  # Monday
    assert after("0 9 * * 1-5", local(PARIS, 2026, 6, 4, 12, 0)) == local(PARIS, 2026, 6, 5, 9)


def test_both_day_fields_restricted_match_either():
    # The 1st of the month or a Monday: from Tuesday 2 June, Monday 8 June comes first.
    assert after("0 9 1 * mon", local(PARIS, 2026, 6, 2, 12)) == local(PARIS, 2026, 6, 8, 9)
    assert after("0 9 1 * mon", local(PARIS, 2026, 6, 29, 12)) == local(PARIS, 2026, 7, 1, 9)


def test_a_schedule_that_never_fires_has_no_next_time():
    assert after("0 9 30 2 *", utc(2026, 1, 1)) is None
    assert after("0 9 29 2 *", utc(2026, 3, 1)) == local(PARIS, 2028, 2, 29, 9)


@pytest.mark.parametrize(
    ("zone", "before_change", "after_change"),
    [
        # Paris: CET (+1) until Sunday 29 March 2026, CEST (+2) after; back on 25 October.
        (PARIS, utc(2026, 3, 27, 8), utc(2026, 3, 30, 7)),
        (PARIS, utc(2026, 10, 23, 7), utc(2026, 10, 26, 8)),
        # New York: EST (-5) until Sunday 8 March 2026, EDT (-4) after; back on 1 November.
        (NEW_YORK, utc(2026, 3, 6, 14), utc(2026, 3, 9, 13)),
        (NEW_YORK, utc(2026, 10, 30, 13), utc(2026, 11, 2, 14)),
    ],
)
def test_0900_weekdays_is_0900_local_on_both_sides_of_a_dst_change(
    zone, before_change, after_change
):
    thursday_afternoon = before_change - timedelta(hours=20)
    assert after("0 9 * * 1-5", thursday_afternoon, zone) == before_change  # Friday 09:00
    assert after("0 9 * * 1-5", before_change, zone) == after_change  # Monday 09:00
    assert after_change.astimezone(zone).hour == before_change.astimezone(zone).hour == 9


def test_a_local_time_the_clocks_skip_fires_at_the_first_valid_instant_after_it():
    # 29 March 2026 in Paris: 02:00 CET -> 03:00 CEST; 02:30 does not exist.
    fire = after("30 2 * * *", local(PARIS, 2026, 3, 28, 12))
    assert fire == utc(2026, 3, 29, 1, 0)  # 03:00 CEST
    assert fire.astimezone(PARIS).strftime("%H:%M %Z") == "03:00 CEST"
    # The next day it is 02:30 again.
    assert after("30 2 * * *", fire) == local(PARIS, 2026, 3, 30, 2, 30)


def test_every_minute_of_a_skipped_hour_fires_once():
    fires = [after("*/20 2 * * *", local(NEW_YORK, 2026, 3, 8, 0, 0), NEW_YORK)]
    fires.append(after("*/20 2 * * *", fires[0], NEW_YORK))
    # 02:00-02:59 does not exist on 8 March 2026: one fire at 03:00 EDT, then the 9th.
    assert fires == [utc(2026, 3, 8, 7, 0), local(NEW_YORK, 2026, 3, 9, 2, 0)]


def test_a_repeated_local_time_fires_once_at_its_first_occurrence():
    # 1 November 2026 in New York: 01:00-01:59 happens in EDT (-4), then again in EST (-5).
    first = after("30 1 * * *", local(NEW_YORK, 2026, 11, 1, 0, 0), NEW_YORK)
    assert first == utc(2026, 11, 1, 5, 30)  # 01:30 EDT
    assert after("30 1 * * *", first, NEW_YORK) == local(NEW_YORK, 2026, 11, 2, 1, 30)
    # From inside the second 01:00-01:59 (EST) it does not fire again that day.
    second_hour = utc(2026, 11, 1, 6, 10)  # 01:10 EST
    assert after("30 1 * * *", second_hour, NEW_YORK) == local(NEW_YORK, 2026, 11, 2, 1, 30)


def test_utc_and_a_zone_differ_by_the_offset():
    noon = utc(2026, 6, 1, 12)
    assert after("0 9 * * *", noon, ZoneInfo("UTC")) == utc(2026, 6, 2, 9)
    assert after("0 9 * * *", noon, ZoneInfo("Asia/Tokyo")) == utc(2026, 6, 2, 0)
