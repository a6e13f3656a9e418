"""The preferences' shape, how PUT and PATCH write them, and the opt-out paths."""

from __future__ import annotations

import pytest

from notifyflow.errors import ApplicationError
from recipients.preference_settings import (
    check_preferences,
    merged,
    opted_out_paths,
    replaced,
)


def test_put_empties_what_it_leaves_out_and_drops_nulls():
    assert replaced({"channels": {"sms": False, "email": None}}) == {
        "channels": {"sms": False},
        "categories": {},
        "workflows": {},
        "quiet_hours": None,
    }


def test_patch_replaces_named_entries_and_null_removes():
    current = {"channels": {"sms": False}, "categories": {"news": False}, "quiet_hours": None}
    patch = {"channels": {"sms": None, "email": True}, "categories": None}
    assert merged(current, patch) == {
        "channels": {"email": True},
        "categories": {},
        "workflows": {},
        "quiet_hours": None,
    }


def test_opted_out_paths_name_every_false_setting():
    prefs = {
        "channels": {"sms": False, "email": True},
        "categories": {"news": False, "promo": {"channels": {"email": False, "sms": True}}},
        "workflows": {"w": True},
    }
    assert opted_out_paths(prefs) == {
        "channels.sms",
        "categories.news",
        "categories.promo.channels.email",
    }


@pytest.mark.parametrize(
    ("value", "field", "code"),
    [
        ([], "body", "not_an_object"),
        ({"channels": {"pigeon": True}}, "channels.pigeon", "unknown_channel"),
        ({"categories": {"a": 1}}, "categories.a", "invalid_setting"),
        (
            {"categories": {"a": {"channels": {"sms": 0}}}},
            "categories.a.channels.sms",
            "not_a_boolean",
        ),
        ({"quiet_hours": {"from": "7:00", "until": "08:00"}}, "quiet_hours.from", "invalid_time"),
        (
            {"quiet_hours": {"from": "07:00", "until": "08:00", "tz": "x"}},
            "quiet_hours.tz",
            "unknown_field",
        ),
        # Quiet hours from 22:00 until 22:00 are no window at all (issue 39 item 4).
        ({"quiet_hours": {"from": "22:00", "until": "22:00"}}, "quiet_hours.until", "empty_window"),
        ({"quiet_hours": {"from": "00:00", "until": "00:00"}}, "quiet_hours.until", "empty_window"),
    ],
)
def test_a_bad_shape_names_the_field_with_a_stable_code(value, field, code):
    with pytest.raises(ApplicationError) as caught:
        check_preferences(value)
    assert (caught.value.field, caught.value.code) == (field, code)
