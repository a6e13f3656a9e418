"""Key formats of every strategy, windows, missing context, long keys capped."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from triggers.idempotency import (
    IdempotencySettings,
    KeyGenerationError,
    cap_key,
    generator_for,
    window_start_ms,
)

AT = datetime(2024, 5, 1, 9, 23, 30, tzinfo=UTC)
CTX = {"userId": "user123", "packageId": "pkg456", "sessionId": "session789"}


def key(
    settings: dict,
    *,
    trigger_id=42,
    event_name="LEARNER_BATCH_ENROLLMENT",
    event_id="event123",
    context=None,
    at=AT,
) -> str:
    generator = generator_for(IdempotencySettings.parse(settings))
    return generator.generate(
        trigger_id=trigger_id,
        event_name=event_name,
        event_id=event_id,
        context=CTX if context is None else context,
        at=at,
    )


def ms(dt: datetime) -> int:
    return int(dt.timestamp()) * 1000


UUID_RE = "[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"


@pytest.mark.parametrize("strategy", ["NONE", "UUID"])
def test_random_strategies_give_a_fresh_uuid_each_time(strategy):
    first, second = key({"strategy": strategy}), key({"strategy": strategy})
    assert re.fullmatch(f"trigger_42_{UUID_RE}", first)
    assert first != second
    bare = key({"strategy": strategy, "includeTriggerId": False})
    assert re.fullmatch(UUID_RE, bare)
    uuid.UUID(bare)


def test_time_window_key_is_trigger_and_window_start_ms():
    # 9:23:30 in a 15-minute window: the window starts at 9:15 (windows align to the Unix epoch).
    assert key({"strategy": "TIME_WINDOW", "ttlMinutes": 15}) == (
        f"trigger_42_{ms(datetime(2024, 5, 1, 9, 15, tzinfo=UTC))}"
    )
    assert key({"strategy": "TIME_WINDOW", "ttlMinutes": 15, "includeTriggerId": False}) == (
        str(ms(datetime(2024, 5, 1, 9, 15, tzinfo=UTC)))
    )


def test_seed_example_9_07_and_9_14_share_a_window_9_23_does_not():
    settings = {"strategy": "TIME_WINDOW", "ttlMinutes": 15}
    at = {m: key(settings, at=datetime(2024, 5, 1, 9, m, tzinfo=UTC)) for m in (7, 14, 23)}
    assert at[7] == at[14] == f"trigger_42_{ms(datetime(2024, 5, 1, 9, 0, tzinfo=UTC))}"
    assert at[23] != at[7]


@pytest.mark.parametrize("ttl", [1, 5, 15, 60, 1440])
def test_window_boundaries_before_at_and_after(ttl):
    boundary = datetime(2024, 5, 2, 0, 0, tzinfo=UTC)  # a multiple of every ttl above
    settings = {"strategy": "TIME_WINDOW", "ttlMinutes": ttl}
    before = key(settings, at=boundary - timedelta(microseconds=1))
    at = key(settings, at=boundary)
    after = key(settings, at=boundary + timedelta(minutes=ttl) - timedelta(microseconds=1))
    next_window = key(settings, at=boundary + timedelta(minutes=ttl))
    assert before != at
    assert at == after == f"trigger_42_{ms(boundary)}"
    assert next_window == f"trigger_42_{ms(boundary) + ttl * 60_000}"
    assert before == f"trigger_42_{ms(boundary) - ttl * 60_000}"


def test_windows_align_to_the_epoch_in_utc_whatever_the_offset():
    paris = AT.astimezone(ZoneInfo("Europe/Paris"))
    assert window_start_ms(paris, 15) == window_start_ms(AT, 15)
    # 9:23 in India (+05:30) is 03:53 UTC: its hourly window starts at 03:00 UTC, which
    # is 8:30 local time — windows follow UTC, not the local clock.
    kolkata = datetime(2024, 5, 1, 9, 23, tzinfo=ZoneInfo("Asia/Kolkata"))
    assert window_start_ms(kolkata, 60) == ms(datetime(2024, 5, 1, 3, 0, tzinfo=UTC))
    # A 7-minute window is aligned to the epoch, not to the hour.
    assert window_start_ms(AT, 7) % (7 * 60_000) == 0
    assert window_start_ms(datetime(1970, 1, 1, 0, 6, tzinfo=UTC), 7) == 0
    assert window_start_ms(datetime(2024, 5, 1, 9, 23, 30), 15) == window_start_ms(AT, 15)


def test_context_based_key_lists_field_names_and_values_in_order():
    assert key({"strategy": "CONTEXT_BASED", "contextFields": ["userId"]}) == (
        "trigger_42_userId_user123"
    )
    assert key(
        {"strategy": "CONTEXT_BASED", "contextFields": ["userId", "packageId", "sessionId"]}
    ) == ("trigger_42_userId_user123_packageId_pkg456_sessionId_session789")
    assert (
        key(
            {
                "strategy": "CONTEXT_BASED",
                "contextFields": ["userId", "packageId"],
                "includeTriggerId": False,
            }
        )
        == "userId_user123_packageId_pkg456"
    )


def test_context_based_key_is_deterministic_and_ignores_time_and_other_fields():
    settings = {"strategy": "CONTEXT_BASED", "contextFields": ["userId"]}
    assert key(settings) == key(
        settings, at=AT + timedelta(days=400), context={**CTX, "other": 1}, event_id="another"
    )
    assert key(settings) != key(settings, context={"userId": "someone-else"})


def test_context_values_render_as_json_scalars_and_compact_sorted_json():
    settings = {"strategy": "CONTEXT_BASED", "contextFields": ["n", "b", "f", "obj", "lst"]}
    context = {"n": 7, "b": True, "f": 2.5, "obj": {"z": 1, "a": "x"}, "lst": [1, "two"]}
    assert key(settings, context=context) == (
        'trigger_42_n_7_b_true_f_2.5_obj_{"a":"x","z":1}_lst_[1,"two"]'
    )


def test_missing_context_renders_null_by_default():
    settings = {"strategy": "CONTEXT_BASED", "contextFields": ["userId", "sessionId"]}
    assert key(settings, context={"userId": "u1"}) == "trigger_42_userId_u1_sessionId_null"
    assert key(settings, context={"userId": "u1", "sessionId": None}) == (
        "trigger_42_userId_u1_sessionId_null"
    )


def test_missing_context_fails_with_fail_on_missing_context():
    settings = {
        "strategy": "CONTEXT_BASED",
        "contextFields": ["userId", "sessionId"],
        "failOnMissingContext": True,
    }
    with pytest.raises(KeyGenerationError) as info:
        key(settings, context={"userId": "u1"})
    assert info.value.code == "missing_context"
    assert info.value.field == "context.sessionId"
    assert key(settings, context={"userId": "u1", "sessionId": "s"}) == (
        "trigger_42_userId_u1_sessionId_s"
    )


def test_context_time_window_key_combines_fields_and_window():
    settings = {"strategy": "CONTEXT_TIME_WINDOW", "contextFields": ["userId"], "ttlMinutes": 60}
    hour = ms(datetime(2024, 5, 1, 9, 0, tzinfo=UTC))
    assert key(settings) == f"trigger_42_userId_user123_{hour}"
    assert key(settings, at=datetime(2024, 5, 1, 9, 59, 59, tzinfo=UTC)) == key(settings)
    assert key(settings, at=datetime(2024, 5, 1, 10, 0, tzinfo=UTC)) == (
        f"trigger_42_userId_user123_{hour + 3_600_000}"
    )
    assert key({**settings, "includeTriggerId": False}, context={}) == f"userId_null_{hour}"
    with pytest.raises(KeyGenerationError):
        key({**settings, "failOnMissingContext": True}, context={})


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (
            {"includeEventType": True, "includeEventId": True},
            "trigger_42_eventType_LEARNER_BATCH_ENROLLMENT_eventId_event123",
        ),
        ({"includeEventType": True}, "trigger_42_eventType_LEARNER_BATCH_ENROLLMENT"),
        ({"includeEventId": True}, "trigger_42_eventId_event123"),
        ({"includeEventId": True, "includeTriggerId": False}, "eventId_event123"),
    ],
)
def test_event_based_key_has_only_the_parts_switched_on(flags, expected):
    assert key({"strategy": "EVENT_BASED", **flags}) == expected


def test_event_based_key_needs_an_event_id_when_it_includes_one():
    with pytest.raises(KeyGenerationError) as info:
        key({"strategy": "EVENT_BASED", "includeEventId": True}, event_id=None)
    assert info.value.code == "missing_event_id" and info.value.field == "event_id"


def test_custom_expression_key_is_the_rendered_template():
    settings = {
        "strategy": "CUSTOM_EXPRESSION",
        "customExpression": "#{triggerId}_#{ctx['roleId']}_#{ctx['organizationId']}",
    }
    assert key(settings, context={"roleId": "admin", "organizationId": 9}) == "42_admin_9"
    # No trigger prefix is added: the expression is the whole key.
    assert (
        key({**settings, "includeTriggerId": True}, context={"roleId": "r", "organizationId": "o"})
        == "42_r_o"
    )


def test_custom_expression_missing_value_null_or_skip():
    settings = {"strategy": "CUSTOM_EXPRESSION", "customExpression": "k_#{ctx.a.b}"}
    assert key(settings, context={}) == "k_null"
    with pytest.raises(KeyGenerationError) as info:
        key({**settings, "failOnMissingContext": True}, context={"a": {}})
    assert info.value.code == "missing_context" and info.value.field == "context.a.b"


def test_custom_expression_runtime_error_is_a_key_generation_error():
    settings = {"strategy": "CUSTOM_EXPRESSION", "customExpression": "#{ctx.a.b}"}
    with pytest.raises(KeyGenerationError) as info:
        key(settings, context={"a": "text"})
    assert info.value.code == "expression_error"


def test_long_keys_are_capped_at_255_with_a_readable_prefix_and_digest():
    settings = {"strategy": "CONTEXT_BASED", "contextFields": ["userId"]}
    long_a = key(settings, context={"userId": "a" * 400})
    long_b = key(settings, context={"userId": "a" * 399 + "b"})
    assert len(long_a) == 255 and long_a.startswith("trigger_42_userId_aaaa")
    assert re.search("_sha256_[0-9a-f]{64}$", long_a)
    assert long_a != long_b
    assert long_a == key(settings, context={"userId": "a" * 400})
    assert cap_key("x" * 255) == "x" * 255
