"""The outbox of events emitted by steps (``triggers.outbox``): a row the step wrote but
whose processing was lost is processed by the sweeper, once."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from executions import sweeper
from tests.executions.nodes.test_emit import created, emit_then_wait
from tests.factories import WorkflowFactory, WorkflowTriggerFactory
from triggers.models import TriggerInstance
from triggers.models.inbox import OutboxEvent

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]


def test_the_sweeper_processes_an_outbox_row_left_unprocessed(dispatched):
    follower = WorkflowFactory()
    WorkflowTriggerFactory(event_name="later", workflow=follower)
    instance = created(WorkflowFactory(definition=emit_then_wait()))
    OutboxEvent.objects.create(
        instance=instance,
        node_id="shout",
        name="later",
        event_id="lost-1",
        subjects=[],
        context={},
        created_at=timezone.now() - timedelta(minutes=5),
    )
    assert sweeper.sweep()["outbox"] == 1
    assert TriggerInstance.objects.filter(workflow=follower).count() == 1
    assert sweeper.sweep()["outbox"] == 0
