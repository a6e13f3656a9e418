"""Masking the payload paths of NOTIFYFLOW_REDACT_PATHS: dot-separated keys, a list on
the way applying the rest of the path to each element; a masked copy, never the
payload itself; nothing configured, nothing copied."""

from __future__ import annotations

from notifyflow.redaction import MASK, redact


def test_redaction_reaches_into_nested_objects_and_lists(settings):
    settings.NOTIFYFLOW_REDACT_PATHS = ["users.email"]
    payload = {"users": [{"email": "a@x", "id": 1}, {"email": "b@x"}], "email": "keep"}
    assert redact(payload) == {
        "users": [{"email": "[redacted]", "id": 1}, {"email": "[redacted]"}],
        "email": "keep",
    }
    assert payload["users"][0]["email"] == "a@x"


def test_missing_paths_and_scalars_are_left_alone(settings):
    settings.NOTIFYFLOW_REDACT_PATHS = ["card.number", "", "token"]
    payload = {"card": "not an object", "name": "Ada"}
    assert redact(payload) == payload
    assert redact("just text") == "just text"
    assert redact([{"token": "t"}, {"other": 1}]) == [{"token": MASK}, {"other": 1}]


def test_nothing_configured_returns_the_payload_itself(settings):
    settings.NOTIFYFLOW_REDACT_PATHS = []
    payload = {"token": "t"}
    assert redact(payload) is payload
