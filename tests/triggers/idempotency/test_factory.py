"""Choosing a key generator from a workflow trigger's stored setting: what cannot be
parsed falls back to a random UUID key, saying why in the log; no setting is UUID too,
quietly."""

from __future__ import annotations

import logging
import re

from tests.triggers.idempotency.test_generators import AT, UUID_RE
from triggers.idempotency import IdempotencySettings, generator_for, resolve_settings


def test_factory_falls_back_to_uuid_for_invalid_json_and_logs(caplog):
    caplog.set_level(logging.WARNING, logger="notifyflow.idempotency")
    resolved = resolve_settings("{not json", label="workflow trigger 9")
    assert resolved.settings == IdempotencySettings()
    assert "invalid idempotency_setting" in resolved.fallback_reason
    assert "workflow trigger 9" in caplog.text and "falling back to UUID" in caplog.text
    generated = generator_for("{not json").generate(
        trigger_id=9, event_name="E", event_id=None, context={}, at=AT
    )
    assert re.fullmatch(f"trigger_9_{UUID_RE}", generated)


def test_factory_falls_back_to_uuid_for_invalid_settings(caplog):
    caplog.set_level(logging.WARNING, logger="notifyflow.idempotency")
    for raw in ({"strategy": "TIME_WINDOW"}, {"strategy": "NOPE"}, [1], {"ttl": 5}):
        generated = generator_for(raw).generate(
            trigger_id=1, event_name="E", event_id=None, context={}, at=AT
        )
        assert re.fullmatch(f"trigger_1_{UUID_RE}", generated)
    assert caplog.text.count("falling back to UUID") == 4


def test_factory_no_settings_is_uuid_without_a_warning(caplog):
    caplog.set_level(logging.WARNING, logger="notifyflow.idempotency")
    resolved = resolve_settings(None)
    assert resolved.settings == IdempotencySettings() and resolved.fallback_reason is None
    assert caplog.text == ""
