"""notifyflow.ids.uuid7: RFC 9562 version 7, ordered by creation time."""

from __future__ import annotations

import time
import uuid

import pytest

from notifyflow.ids import uuid7
from tests.factories import TriggerInstanceFactory, WorkflowFactory
from triggers.services import trigger_create


def test_uuid7_has_version_7_and_the_rfc_variant() -> None:
    value = uuid7()
    assert value.version == 7
    assert value.variant == uuid.RFC_4122


def test_uuid7_starts_with_the_creation_time_in_milliseconds() -> None:
    before = time.time_ns() // 1_000_000
    value = uuid7()
    after = time.time_ns() // 1_000_000
    assert before <= value.int >> 80 <= after


def test_uuid7s_of_later_milliseconds_sort_after_earlier_ones() -> None:
    first = uuid7()
    time.sleep(0.002)
    assert uuid7() > first
    assert len({uuid7() for _ in range(1000)}) == 1000


@pytest.mark.django_db
def test_new_instances_get_time_ordered_ids() -> None:
    """trigger_create and the model's default both use notifyflow.ids.uuid7."""
    workflow = WorkflowFactory()
    created = trigger_create(workflow=workflow, idempotency_key="k1", payload={}).instance
    later = TriggerInstanceFactory(workflow=workflow)
    assert created.pk.version == 7
    assert later.pk.version == 7
