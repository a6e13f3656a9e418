"""Durations as a definition writes them (``"90s"``, ``"1h30m"``, ``"1d"``, ISO-8601
``"PT15M"``): parsed to a timedelta, bounded by MAX_DURATION, and the JSON Schema
pattern accepts exactly what the parser does."""

from __future__ import annotations

import re

import pytest

from workflows.durations import MAX_DURATION, duration_pattern, parse_duration


@pytest.mark.parametrize(
    "text,seconds",
    [
        ("90s", 90),
        ("15m", 900),
        ("2h", 7200),
        ("1d", 86400),
        ("1h30m", 5400),
        ("PT15M", 900),
        ("P1DT2H", 93600),
        ("PT0.5S", 0.5),
    ],
)
def test_durations(text, seconds):
    assert parse_duration(text).total_seconds() == seconds


@pytest.mark.parametrize("text", ["", "5", "m", "PT", "1x", "-5s"])
def test_bad_durations(text):
    with pytest.raises(ValueError):
        parse_duration(text)


def test_a_duration_longer_than_the_maximum_is_refused_saying_so():
    assert parse_duration(f"{MAX_DURATION.days}d") == MAX_DURATION
    with pytest.raises(ValueError, match="longer than the maximum of 3650 days"):
        parse_duration(f"{MAX_DURATION.days + 1}d")
    with pytest.raises(ValueError, match="longer than the maximum"):
        parse_duration("9" * 30 + "d")  # past what timedelta holds: still a ValueError


def test_a_value_that_is_not_a_string_is_refused_and_a_long_one_is_shown_cut():
    with pytest.raises(ValueError, match="must be a string"):
        parse_duration(90)  # type: ignore[arg-type]
    with pytest.raises(ValueError) as info:
        parse_duration("x" * 200)
    assert "x" * 41 not in str(info.value)


@pytest.mark.parametrize("text", ["90s", "1h30m", "1d", "PT15M", "P1DT2H", "PT0.5S", "P2W"])
def test_the_schema_pattern_accepts_what_the_parser_accepts(text):
    parse_duration(text)
    assert re.fullmatch(duration_pattern(), text)


@pytest.mark.parametrize("text", ["5", "m", "1x", "-5s", "90 s"])
def test_the_schema_pattern_refuses_what_the_parser_refuses(text):
    with pytest.raises(ValueError):
        parse_duration(text)
    assert not re.fullmatch(duration_pattern(), text)
