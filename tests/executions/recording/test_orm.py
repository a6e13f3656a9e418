"""The ORM step recorder (SQLite and ``make run``; portable, so it runs on both
databases here) claims what the recorder of the database in use claims: an enqueued,
due instance with its pinned version, this node's delivery record and its audience
(the recipient and the workflow's settings as they read now); nothing for an instance
that is not claimable. On PostgreSQL this is the twin test of the one-statement claim.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from executions.recording import RECORDER
from executions.recording.orm import OrmStepRecorder
from tests.factories import RecipientFactory, TriggerInstanceFactory, WorkflowFactory
from triggers.models import TriggerInstance, TriggerStatus
from workflows.models import Workflow

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]

RECORDERS = {"orm": OrmStepRecorder(), "this database's": RECORDER}


def seen(claimed) -> tuple:
    """What a claim hands the step, without the ids that differ per instance."""
    instance = claimed.instance
    return (
        instance.status,
        instance.current_node_id,
        instance.lease_token is not None,
        claimed.version.number,
        claimed.version.workflow_key,
        claimed.delivery_status,
        claimed.delivery_output,
        claimed.audience,
    )


def test_both_recorders_claim_the_same_for_a_recipient_of_a_critical_workflow():
    wf = WorkflowFactory()
    Workflow.objects.filter(pk=wf.pk).update(critical=True, categories=["news"])
    person = RecipientFactory(id="ada", email="ada@example.com")
    claims = {}
    for name, recorder in RECORDERS.items():
        instance = TriggerInstanceFactory(workflow=wf, recipient=person)
        claims[name] = recorder.claim(instance_id=instance.pk, worker="w1", now=timezone.now())
        assert claims[name] is not None, name
        stored = TriggerInstance.objects.get(pk=instance.pk)
        assert stored.status == TriggerStatus.PROCESSING and stored.locked_by == "w1"
    orm, native = (seen(claim) for claim in claims.values())
    assert orm == native
    audience = claims["orm"].audience
    assert (audience.critical, audience.categories) == (True, ("news",))
    assert audience.recipient is not None and audience.recipient.email == "ada@example.com"


@pytest.mark.parametrize("name", RECORDERS)
def test_an_instance_that_is_not_claimable_gives_nothing(name):
    recorder = RECORDERS[name]
    later = TriggerInstanceFactory(available_at=timezone.now() + timedelta(hours=1))
    done = TriggerInstanceFactory(status=TriggerStatus.COMPLETED, current_node_id=None)
    taken = TriggerInstanceFactory()
    now = timezone.now()
    assert recorder.claim(instance_id=taken.pk, worker="w1", now=now) is not None
    for instance in (later, done, taken):
        assert recorder.claim(instance_id=instance.pk, worker="w2", now=now) is None
    assert (
        recorder.claim(instance_id="00000000-0000-0000-0000-000000000000", worker="w", now=now)
        is None
    )


@pytest.mark.parametrize("name", RECORDERS)
def test_a_payload_only_instance_has_no_recipient_and_its_workflows_settings(name):
    instance = TriggerInstanceFactory()
    claimed = RECORDERS[name].claim(instance_id=instance.pk, worker="w1", now=timezone.now())
    assert claimed is not None
    assert claimed.audience.recipient is None and claimed.audience.critical is False
    assert claimed.version.id == instance.workflow_version_id
