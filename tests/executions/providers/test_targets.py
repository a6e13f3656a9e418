"""A push or chat target's result: Retry-After read in both forms, statuses classified,
the result shown and raised the house way."""

from __future__ import annotations

import email.utils

import pytest

from executions.providers.base import ProviderError
from executions.providers.targets import (
    TargetOutcome,
    TargetResult,
    by_status,
    retry_after_seconds,
)

NOW = 1_700_000_000.0


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("120", 120.0),
        (" 1.5 ", 1.5),
        ("-3", 0.0),
        (email.utils.formatdate(NOW + 90, usegmt=True), 90.0),
        (email.utils.formatdate(NOW - 90, usegmt=True), 0.0),
        ("", None),
        (None, None),
        ("soon", None),
        ("nan", None),
        ("inf", None),
    ],
)
def test_retry_after_is_delta_seconds_or_an_http_date(value, seconds):
    assert retry_after_seconds(value, now=NOW) == seconds


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (404, TargetOutcome.DEAD),
        (410, TargetOutcome.DEAD),
        (408, TargetOutcome.RETRY),
        (429, TargetOutcome.RETRY),
        (500, TargetOutcome.RETRY),
        (503, TargetOutcome.RETRY),
        (400, TargetOutcome.FAILED),
        (403, TargetOutcome.FAILED),
        (302, TargetOutcome.FAILED),
    ],
)
def test_a_status_alone_is_dead_transient_or_permanent(status, outcome):
    result = by_status("discord", status, dead=frozenset({404, 410}))
    assert (result.outcome, result.code) == (outcome, str(status))


def test_a_transient_status_carries_retry_after_and_the_services_code():
    result = by_status("slack", 429, code="rate_limited", retry_after="30")
    assert (result.code, result.retry_after_s) == ("rate_limited", 30.0)
    assert by_status("fcm", 400, retry_after="30").retry_after_s is None


def test_a_result_is_shown_without_its_empty_fields():
    accepted = TargetResult(TargetOutcome.ACCEPTED, "apns", provider_message_id="A-1")
    assert accepted.as_dict() == {"outcome": "accepted", "provider": "apns", "message_id": "A-1"}
    retry = TargetResult(TargetOutcome.RETRY, "fcm", code="QUOTA_EXCEEDED", retry_after_s=30.0)
    assert retry.as_dict() == {
        "outcome": "retry",
        "provider": "fcm",
        "code": "QUOTA_EXCEEDED",
        "retry_after_s": 30.0,
    }


def test_a_result_becomes_the_house_provider_error():
    retry = TargetResult(TargetOutcome.RETRY, "fcm", code="UNAVAILABLE").as_error()
    dead = TargetResult(TargetOutcome.DEAD, "apns", code="Unregistered").as_error()
    failed = TargetResult(TargetOutcome.FAILED, "slack", code="is_archived", detail="x").as_error()
    assert isinstance(retry, ProviderError) and not retry.permanent
    assert dead.permanent and failed.permanent
    assert str(failed) == "slack failed: is_archived (x)"
    with pytest.raises(ValueError):
        TargetResult(TargetOutcome.ACCEPTED, "fcm").as_error()
