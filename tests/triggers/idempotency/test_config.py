"""IdempotencySettings.parse: defaults, required fields per strategy, types, unknown keys."""

from __future__ import annotations

import pytest

from triggers.idempotency import IdempotencySettings, SettingsError, Strategy


def test_no_settings_defaults_to_uuid_with_seed_defaults():
    for raw in (None, {}, "", "  "):
        parsed = IdempotencySettings.parse(raw)
        assert parsed.strategy is Strategy.UUID
        assert parsed.include_trigger_id is True
        assert parsed.include_event_type is False
        assert parsed.include_event_id is False
        assert parsed.fail_on_missing_context is False


def test_json_text_is_accepted():
    parsed = IdempotencySettings.parse('{"strategy": "TIME_WINDOW", "ttlMinutes": 15}')
    assert parsed.strategy is Strategy.TIME_WINDOW and parsed.ttl_minutes == 15


def test_seed_basic_structure_parses_and_round_trips():
    raw = {
        "strategy": "CONTEXT_TIME_WINDOW",
        "ttlMinutes": 15,
        "contextFields": ["userId", "packageId"],
        "includeTriggerId": True,
        "includeEventType": False,
        "includeEventId": False,
        "failOnMissingContext": False,
    }
    parsed = IdempotencySettings.parse(raw)
    assert parsed.context_fields == ("userId", "packageId")
    assert IdempotencySettings.parse(parsed.to_json()) == parsed
    assert set(parsed.to_json()) == {
        "strategy",
        "ttlMinutes",
        "contextFields",
        "includeTriggerId",
        "includeEventType",
        "includeEventId",
        "customExpression",
        "failOnMissingContext",
    }


@pytest.mark.parametrize(
    ("raw", "field", "code"),
    [
        ({"strategy": "TIME_WINDOW"}, "ttlMinutes", "required"),
        ({"strategy": "CONTEXT_TIME_WINDOW", "contextFields": ["u"]}, "ttlMinutes", "required"),
        ({"strategy": "TIME_WINDOW", "ttlMinutes": 0}, "ttlMinutes", "invalid_type"),
        ({"strategy": "TIME_WINDOW", "ttlMinutes": -5}, "ttlMinutes", "invalid_type"),
        ({"strategy": "TIME_WINDOW", "ttlMinutes": "15"}, "ttlMinutes", "invalid_type"),
        ({"strategy": "TIME_WINDOW", "ttlMinutes": 1.5}, "ttlMinutes", "invalid_type"),
        ({"strategy": "TIME_WINDOW", "ttlMinutes": True}, "ttlMinutes", "invalid_type"),
        ({"strategy": "TIME_WINDOW", "ttlMinutes": 10**12}, "ttlMinutes", "too_large"),
        ({"strategy": "CONTEXT_BASED"}, "contextFields", "required"),
        ({"strategy": "CONTEXT_BASED", "contextFields": []}, "contextFields", "required"),
        ({"strategy": "CONTEXT_BASED", "contextFields": "userId"}, "contextFields", "invalid_type"),
        (
            {"strategy": "CONTEXT_BASED", "contextFields": ["a", 3]},
            "contextFields[1]",
            "invalid_type",
        ),
        (
            {"strategy": "CONTEXT_BASED", "contextFields": ["a", " "]},
            "contextFields[1]",
            "invalid_type",
        ),
        (
            {"strategy": "CONTEXT_BASED", "contextFields": ["a", "a"]},
            "contextFields[1]",
            "duplicate",
        ),
        ({"strategy": "CONTEXT_TIME_WINDOW", "ttlMinutes": 5}, "contextFields", "required"),
        ({"strategy": "CUSTOM_EXPRESSION"}, "customExpression", "required"),
        ({"strategy": "CUSTOM_EXPRESSION", "customExpression": ""}, "customExpression", "required"),
        (
            {"strategy": "CUSTOM_EXPRESSION", "customExpression": 5},
            "customExpression",
            "invalid_type",
        ),
        (
            {"strategy": "CUSTOM_EXPRESSION", "customExpression": "#{ctx['a'"},
            "customExpression",
            "invalid_expression",
        ),
        (
            {"strategy": "CUSTOM_EXPRESSION", "customExpression": "#{os.system}"},
            "customExpression",
            "invalid_expression",
        ),
        ({"strategy": "EVENT_BASED"}, "includeEventId", "required"),
        ({"strategy": "UUID", "includeTriggerId": "yes"}, "includeTriggerId", "invalid_type"),
        ({"strategy": "UUID", "failOnMissingContext": 1}, "failOnMissingContext", "invalid_type"),
        ({"strategy": "UUID", "includeEventType": "true"}, "includeEventType", "invalid_type"),
        ({"strategy": "FOREVER"}, "strategy", "unknown_strategy"),
        ({"strategy": "uuid"}, "strategy", "unknown_strategy"),
        ({"strategy": 3}, "strategy", "unknown_strategy"),
        ({"strategy": "UUID", "ttlMinute": 5}, "ttlMinute", "unknown_option"),
        ([1, 2], None, "not_an_object"),
        ("{not json", None, "invalid_json"),
        ('"UUID"', None, "not_an_object"),
    ],
)
def test_invalid_settings_raise_naming_the_field(raw, field, code):
    with pytest.raises(SettingsError) as info:
        IdempotencySettings.parse(raw)
    assert info.value.field == field
    assert info.value.code == code
    if field:
        assert str(info.value).startswith(f"{field}: ")


def test_event_based_with_only_one_flag_is_valid():
    assert IdempotencySettings.parse(
        {"strategy": "EVENT_BASED", "includeEventId": True}
    ).include_event_id
    assert IdempotencySettings.parse(
        {"strategy": "EVENT_BASED", "includeEventType": True}
    ).include_event_type


def test_null_options_count_as_absent():
    parsed = IdempotencySettings.parse(
        {"strategy": "UUID", "ttlMinutes": None, "customExpression": None, "includeTriggerId": None}
    )
    assert parsed == IdempotencySettings()
