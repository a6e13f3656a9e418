"""When an email or SMS may be sent: send windows, quiet hours, timezones and DST."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from gates.send_windows import deferral_reason, expired, next_send_time

WEEKDAYS = ["mon", "tue", "wed", "thu", "fri"]
EVERY_DAY = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
NIGHT = {"from": "22:00", "until": "07:00"}


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def window(
    days: list[str] = WEEKDAYS, start: str = "09:00", end: str = "17:00", tz: str = "UTC"
) -> dict:
    return {"days": days, "from": start, "until": end, "timezone": tz}


def send_time(
    now: datetime,
    send_window: dict | None = None,
    quiet_hours: dict | None = None,
    recipient_timezone: str | None = None,
    critical: bool = False,
) -> datetime:
    return next_send_time(
        now=now,
        send_window=send_window,
        quiet_hours=quiet_hours,
        recipient_timezone=recipient_timezone,
        ignore_quiet_hours=critical,
    )


# --- send windows --------------------------------------------------------------------


def test_no_window_and_no_quiet_hours_sends_now():
    now = utc(2026, 5, 2, 3, 0)
    assert send_time(now) == now


def test_inside_the_window_sends_now():
    now = utc(2026, 5, 4, 12, 34, 56)  # Monday
    assert send_time(now, window()) == now


def test_the_window_includes_its_opening_and_excludes_its_closing_minute():
    assert send_time(utc(2026, 5, 4, 9, 0), window()) == utc(2026, 5, 4, 9, 0)
    assert send_time(utc(2026, 5, 4, 17, 0), window()) == utc(2026, 5, 5, 9, 0)


def test_before_the_window_waits_for_it_to_open_the_same_day():
    # 09:00 in Paris in May is 07:00 UTC.
    assert send_time(utc(2026, 5, 4, 5, 0), window(tz="Europe/Paris")) == utc(2026, 5, 4, 7, 0)


def test_after_friday_s_window_waits_for_monday():
    assert send_time(utc(2026, 5, 1, 18, 0), window()) == utc(2026, 5, 4, 9, 0)


def test_a_weekend_waits_for_the_next_allowed_weekday():
    assert send_time(utc(2026, 5, 2, 12, 0), window()) == utc(2026, 5, 4, 9, 0)
    assert send_time(utc(2026, 5, 4, 12, 0), window(days=["wed"])) == utc(2026, 5, 6, 9, 0)


def test_an_overnight_window_belongs_to_the_day_it_opened():
    friday_night = window(days=["fri"], start="22:00", end="06:00")
    # Saturday 03:00 is inside Friday's window.
    saturday_early = utc(2026, 5, 2, 3, 0)
    assert send_time(saturday_early, friday_night) == saturday_early
    # Friday 03:00 would be Thursday's window, which there is none of: Friday 22:00.
    assert send_time(utc(2026, 5, 1, 3, 0), friday_night) == utc(2026, 5, 1, 22, 0)
    # It closes at 06:00 Saturday: then next Friday.
    assert send_time(utc(2026, 5, 2, 6, 0), friday_night) == utc(2026, 5, 8, 22, 0)


def test_the_answer_is_in_the_timezone_now_was_given_in():
    paris = ZoneInfo("Europe/Paris")
    now = datetime(2026, 5, 4, 7, 0, tzinfo=paris)
    found = send_time(now, window(tz="Europe/Paris"))
    assert found == datetime(2026, 5, 4, 9, 0, tzinfo=paris)
    assert found.tzinfo is paris


def test_now_must_be_aware():
    with pytest.raises(ValueError):
        send_time(datetime(2026, 5, 4, 12, 0), window())


# --- quiet hours ---------------------------------------------------------------------


def test_quiet_hours_overnight_defer_until_they_end_the_next_morning():
    assert send_time(utc(2026, 5, 4, 23, 0), quiet_hours=NIGHT) == utc(2026, 5, 5, 7, 0)
    assert send_time(utc(2026, 5, 5, 6, 59), quiet_hours=NIGHT) == utc(2026, 5, 5, 7, 0)


def test_outside_quiet_hours_sends_now():
    for now in (utc(2026, 5, 5, 7, 0), utc(2026, 5, 5, 21, 59)):
        assert send_time(now, quiet_hours=NIGHT) == now


def test_quiet_hours_within_a_day():
    lunch = {"from": "12:00", "until": "13:30"}
    assert send_time(utc(2026, 5, 5, 12, 10), quiet_hours=lunch) == utc(2026, 5, 5, 13, 30)


def test_quiet_hours_from_equal_to_until_forbid_nothing():
    now = utc(2026, 5, 5, 3, 0)
    assert send_time(now, quiet_hours={"from": "03:00", "until": "03:00"}) == now


def test_quiet_hours_are_in_the_recipient_s_timezone():
    # 23:00 UTC is 19:00 in New York (EDT): not quiet there.
    now = utc(2026, 5, 4, 23, 0)
    assert send_time(now, quiet_hours=NIGHT, recipient_timezone="America/New_York") == now
    # 03:00 UTC is 23:00 in New York: quiet until 07:00 EDT = 11:00 UTC.
    assert send_time(
        utc(2026, 5, 5, 3, 0), quiet_hours=NIGHT, recipient_timezone="America/New_York"
    ) == utc(2026, 5, 5, 11, 0)


def test_critical_workflows_ignore_quiet_hours_but_not_their_send_window():
    now = utc(2026, 5, 4, 23, 0)  # Monday, quiet
    assert send_time(now, quiet_hours=NIGHT, critical=True) == now
    evening = window(days=EVERY_DAY, start="08:00", end="20:00")
    assert send_time(now, evening, NIGHT, critical=True) == utc(2026, 5, 5, 8, 0)


# --- both ----------------------------------------------------------------------------


def test_window_and_quiet_hours_give_the_earliest_instant_both_allow():
    early = window(days=EVERY_DAY, start="06:00", end="09:00")
    # The window opens at 06:00, but quiet hours last until 07:00.
    assert send_time(utc(2026, 5, 4, 5, 0), early, NIGHT) == utc(2026, 5, 4, 7, 0)
    late = window(days=EVERY_DAY, start="20:00", end="23:00")
    # 22:30 is inside the window but quiet; the window's next allowed minute is tomorrow 20:00.
    assert send_time(utc(2026, 5, 4, 22, 30), late, NIGHT) == utc(2026, 5, 5, 20, 0)


def test_quiet_hours_covering_the_whole_window_give_way_to_the_window():
    night_window = window(days=EVERY_DAY, start="23:00", end="05:00")
    assert send_time(utc(2026, 5, 4, 12, 0), night_window, NIGHT) == utc(2026, 5, 4, 23, 0)


# --- timezones -----------------------------------------------------------------------


def test_a_recipient_window_uses_the_recipient_s_timezone():
    tokyo_nine = utc(2026, 5, 4, 0, 0)  # 09:00 in Tokyo, Monday
    assert (
        send_time(utc(2026, 5, 3, 20, 0), window(tz="recipient"), recipient_timezone="Asia/Tokyo")
        == tokyo_nine
    )


@pytest.mark.parametrize("recipient_timezone", [None, "", "Not/AZone", "America", "../etc"])
def test_a_recipient_window_without_a_known_recipient_timezone_is_in_utc(recipient_timezone):
    assert send_time(
        utc(2026, 5, 4, 5, 0), window(tz="recipient"), recipient_timezone=recipient_timezone
    ) == utc(2026, 5, 4, 9, 0)


def test_an_iana_window_ignores_the_recipient_s_timezone():
    assert send_time(
        utc(2026, 5, 4, 5, 0), window(tz="Europe/Paris"), recipient_timezone="Asia/Tokyo"
    ) == utc(2026, 5, 4, 7, 0)


def test_quiet_hours_without_a_recipient_timezone_use_the_window_s_iana_timezone():
    anytime = window(days=EVERY_DAY, start="00:00", end="23:59", tz="Europe/Paris")
    # 21:00 UTC is 23:00 in Paris: quiet until 07:00 Paris = 05:00 UTC.
    assert send_time(utc(2026, 5, 4, 21, 0), anytime, NIGHT) == utc(2026, 5, 5, 5, 0)
    # With an unknown recipient timezone, the same.
    assert send_time(
        utc(2026, 5, 4, 21, 0), anytime, NIGHT, recipient_timezone="Mars/Olympus"
    ) == utc(2026, 5, 5, 5, 0)


def test_quiet_hours_with_a_recipient_window_and_no_recipient_timezone_are_in_utc():
    anytime = window(days=EVERY_DAY, start="00:00", end="23:59", tz="recipient")
    now = utc(2026, 5, 4, 21, 0)  # not quiet in UTC
    assert send_time(now, anytime, NIGHT) == now


# --- daylight saving -----------------------------------------------------------------


def test_a_window_opening_in_the_spring_forward_gap_opens_at_the_next_valid_minute():
    # New York, Sunday 2026-03-08: 02:00 EST jumps to 03:00 EDT; 02:30 does not exist.
    sunday = window(days=["sun"], start="02:30", end="05:00", tz="America/New_York")
    assert send_time(utc(2026, 3, 8, 5, 0), sunday) == utc(2026, 3, 8, 7, 0)  # 03:00 EDT


def test_a_window_opening_at_an_ambiguous_fall_back_time_opens_at_its_first_occurrence():
    # New York, Sunday 2026-11-01: 01:00-02:00 happens twice (EDT, then EST).
    sunday = window(days=["sun"], start="01:30", end="04:00", tz="America/New_York")
    assert send_time(utc(2026, 11, 1, 4, 0), sunday) == utc(2026, 11, 1, 5, 30)  # 01:30 EDT
    # The second 01:30 (EST, 06:30 UTC) is still inside the window.
    second = utc(2026, 11, 1, 6, 30)
    assert send_time(second, sunday) == second


def test_quiet_hours_ending_in_a_dst_gap_end_at_the_next_valid_minute():
    quiet = {"from": "22:00", "until": "02:30"}
    # Saturday 23:00 EST = Sunday 04:00 UTC; 02:30 does not exist, so 03:00 EDT.
    assert send_time(
        utc(2026, 3, 8, 4, 0), quiet_hours=quiet, recipient_timezone="America/New_York"
    ) == utc(2026, 3, 8, 7, 0)


def test_europe_london_follows_british_summer_time():
    london = window(days=EVERY_DAY, tz="Europe/London")
    assert send_time(utc(2026, 1, 15, 6, 0), london) == utc(2026, 1, 15, 9, 0)  # GMT
    assert send_time(utc(2026, 7, 15, 6, 0), london) == utc(2026, 7, 15, 8, 0)  # BST
    # Sunday 2026-03-29: 01:00 GMT jumps to 02:00 BST; 01:15 opens at 02:00 BST (01:00 UTC).
    gap = window(days=["sun"], start="01:15", end="03:00", tz="Europe/London")
    assert send_time(utc(2026, 3, 28, 23, 0), gap) == utc(2026, 3, 29, 1, 0)


# --- the reason and expiry -----------------------------------------------------------


def reason(now: datetime, **kwargs) -> str | None:
    kwargs.setdefault("send_window", None)
    kwargs.setdefault("quiet_hours", None)
    kwargs.setdefault("recipient_timezone", None)
    kwargs.setdefault("ignore_quiet_hours", False)
    return deferral_reason(now=now, **kwargs)


def test_the_reason_names_the_window_or_the_quiet_hours():
    saturday = utc(2026, 5, 2, 12, 0)
    assert (
        reason(saturday, send_window=window(tz="Europe/Paris"))
        == "outside send window mon-fri 09:00-17:00 Europe/Paris"
    )
    assert (
        reason(utc(2026, 5, 5, 3, 0), quiet_hours=NIGHT, recipient_timezone="America/New_York")
        == "quiet hours 22:00-07:00 America/New_York"
    )
    assert (
        reason(saturday, send_window=window(days=["sun", "mon"], tz="recipient"))
        == "outside send window mon,sun 09:00-17:00 UTC"
    )


def test_no_reason_when_the_send_is_allowed():
    assert reason(utc(2026, 5, 4, 12, 0), send_window=window(), quiet_hours=NIGHT) is None
    assert reason(utc(2026, 5, 4, 23, 0), quiet_hours=NIGHT, ignore_quiet_hours=True) is None


def test_a_deferral_past_expires_after_is_expired():
    reached = utc(2026, 5, 4, 12, 0)
    hour = timedelta(hours=1)
    assert expired(reached_at=reached, expires_after=hour, send_at=reached + 2 * hour)
    assert not expired(reached_at=reached, expires_after=hour, send_at=reached + hour)
    assert not expired(reached_at=reached, expires_after=hour, send_at=reached)
    assert not expired(reached_at=reached, expires_after=None, send_at=reached + 99 * hour)
    assert not expired(reached_at=None, expires_after=hour, send_at=reached + 2 * hour)
