"""The concurrency key rendered at creation on every insert path: a POST,
a bulk request (mixed workflows), a trigger naming recipients, a list fan-out; null for
a workflow without a limit."""

from __future__ import annotations

import pytest

from tests.factories import PAYLOAD, WorkflowFactory
from tests.triggers.test_fanout import members
from triggers import fanout
from triggers.models import TriggerInstance
from triggers.services import (
    RecipientEntry,
    TriggerItem,
    trigger_create,
    trigger_create_bulk,
    trigger_create_for_recipients,
)
from workflows.concurrency import Concurrency

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]

PER_TENANT = Concurrency(limit=2, key="{{ payload.tenant }}")
PER_PERSON = Concurrency(limit=1, key="{{ payload.tenant }}:{{ recipient.id }}")


def keys(workflow) -> dict[str, str | None]:
    """idempotency key (or recipient id) -> the instance's concurrency key."""
    return {
        recipient or key: concurrency_key
        for key, recipient, concurrency_key in TriggerInstance.objects.filter(
            workflow=workflow
        ).values_list("idempotency_key", "recipient_id", "concurrency_key")
    }


def test_a_post_renders_the_key_and_no_limit_leaves_it_null():
    limited = WorkflowFactory(concurrency=PER_TENANT)
    free = WorkflowFactory()
    trigger_create(workflow=limited, idempotency_key="a", payload={**PAYLOAD, "tenant": "acme"})
    trigger_create(workflow=free, idempotency_key="a", payload={**PAYLOAD, "tenant": "acme"})
    assert keys(limited) == {"a": "acme"}
    assert keys(free) == {"a": None}


def test_the_whole_workflow_key_is_empty_not_null():
    workflow = WorkflowFactory(concurrency=Concurrency(limit=3))
    trigger_create(workflow=workflow, idempotency_key="a", payload=PAYLOAD)
    assert keys(workflow) == {"a": ""}


def test_bulk_renders_each_items_key_next_to_unlimited_workflows():
    limited = WorkflowFactory(concurrency=PER_TENANT)
    free = WorkflowFactory()
    items = [
        TriggerItem(limited.key, "a", {**PAYLOAD, "tenant": "acme"}),
        TriggerItem(free.key, "b", {**PAYLOAD, "tenant": "acme"}),
        TriggerItem(limited.key, "c", {**PAYLOAD, "tenant": "globex"}),
        TriggerItem(limited.key, "d", dict(PAYLOAD)),  # no tenant: the workflow-wide key
    ]
    outcomes = trigger_create_bulk(items=items)
    assert [o.status for o in outcomes] == ["created"] * 4
    assert keys(limited) == {"a": "acme", "c": "globex", "d": ""}
    assert keys(free) == {"b": None}


def test_recipients_each_get_their_own_key():
    workflow = WorkflowFactory(concurrency=PER_PERSON)
    trigger_create_for_recipients(
        workflow=workflow,
        idempotency_key="k",
        payload={**PAYLOAD, "tenant": "acme"},
        recipients=[RecipientEntry(id="r1"), RecipientEntry(id="r2")],
    )
    assert keys(workflow) == {"r1": "acme:r1", "r2": "acme:r2"}


@pytest.mark.parametrize("concurrency", [PER_PERSON, None])
def test_a_list_fan_out_renders_each_members_key(concurrency):
    workflow = WorkflowFactory(key="welcome", concurrency=concurrency)
    members("team", ["m1", "m2", "m3"])
    result = trigger_create_for_recipients(
        workflow=workflow,
        idempotency_key="k",
        payload={**PAYLOAD, "tenant": "acme"},
        recipients=[RecipientEntry(list_key="team")],
    )
    assert result.fanout is not None
    assert fanout.fanout_run(fanout_id=result.fanout.pk, batch=2) == "done"
    expected = {f"m{n}": f"acme:m{n}" if concurrency else None for n in (1, 2, 3)}
    assert keys(workflow) == expected
