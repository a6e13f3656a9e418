"""Triggering people (``trigger_create_for_recipients``): one instance per distinct
recipient named, all under the request's key; inline recipients upserted and unknown
ids created empty; a repeat creates only what is missing; a list becomes one fan-out
job; unknown lists, too many entries and unreadable replays are refused naming the
field. Runs on both databases (one batched insert per database)."""

from __future__ import annotations

import pytest

from api_keys.models import ApiKeyScope
from api_keys.services import api_key_create
from notifyflow.errors import ApplicationError, ConflictError
from recipients.models import Recipient
from tests.factories import PAYLOAD, RecipientFactory, RecipientListFactory, WorkflowFactory
from triggers.models import TriggerInstance
from triggers.models.fanouts import FanOut
from triggers.services import RecipientEntry, trigger_create_for_recipients
from triggers.services.people import MAX_RECIPIENTS

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]


def trigger(*entries: RecipientEntry, workflow: str = "welcome", key: str = "k", **kwargs):
    return trigger_create_for_recipients(
        workflow=workflow, idempotency_key=key, payload=PAYLOAD, recipients=list(entries), **kwargs
    )


@pytest.fixture
def welcome(db):
    return WorkflowFactory(key="welcome")


def test_one_instance_per_distinct_recipient_in_the_order_first_named(welcome, dispatched):
    result = trigger(RecipientEntry(id="b"), RecipientEntry(id="a"), RecipientEntry(id="b"))
    assert [(i.recipient, i.status) for i in result.instances] == [
        ("b", "created"),
        ("a", "created"),
    ]
    assert result.created and result.fanout is None
    rows = TriggerInstance.objects.filter(idempotency_key="k")
    assert sorted(rows.values_list("recipient_id", flat=True)) == ["a", "b"]
    assert sorted(i for i, _ in dispatched) == sorted(str(i.id) for i in result.instances)


def test_inline_recipients_are_upserted_and_unknown_ids_created_empty(welcome, dispatched):
    RecipientFactory(id="known", email="old@example.com")
    trigger(
        RecipientEntry(id="known", fields={"email": "new@example.com"}),
        RecipientEntry(id="stranger"),
    )
    assert Recipient.objects.get(id="known").email == "new@example.com"
    stranger = Recipient.objects.get(id="stranger")
    assert (stranger.email, stranger.phone) == (None, None)


def test_a_repeat_creates_only_what_is_missing(welcome, dispatched):
    first = trigger(RecipientEntry(id="a"))
    again = trigger(RecipientEntry(id="a"), RecipientEntry(id="b"))
    assert [(i.recipient, i.status) for i in again.instances] == [
        ("a", "duplicate"),
        ("b", "created"),
    ]
    assert again.instances[0].id == first.instances[0].id
    assert TriggerInstance.objects.count() == 2
    assert not trigger(RecipientEntry(id="a"), RecipientEntry(id="b")).created


def test_a_list_becomes_one_fan_out_job_excluding_the_recipients_named(welcome, dispatched):
    RecipientListFactory(key="all")
    result = trigger(RecipientEntry(id="a"), RecipientEntry(list_key="all"))
    assert result.fanout is not None and result.fanout_created
    again = trigger(RecipientEntry(list_key="all"))
    assert again.fanout is not None and again.fanout.pk == result.fanout.pk
    assert not again.fanout_created
    assert FanOut.objects.count() == 1


def test_an_unknown_list_is_refused_naming_its_entry_and_nothing_is_created(welcome, dispatched):
    with pytest.raises(ApplicationError) as refused:
        trigger(RecipientEntry(id="a"), RecipientEntry(list_key="nope"))
    assert (refused.value.code, refused.value.field) == ("unknown_list", "recipients[1]")
    assert not TriggerInstance.objects.exists() and not Recipient.objects.exists()


def test_too_many_recipients_are_refused(welcome, dispatched):
    entries = [RecipientEntry(id=f"r{n}") for n in range(MAX_RECIPIENTS + 1)]
    with pytest.raises(ApplicationError) as refused:
        trigger(*entries)
    assert (refused.value.code, refused.value.field) == ("too_many_recipients", "recipients")


def test_an_inactive_workflow_still_answers_a_full_replay_but_refuses_anything_new(
    welcome, dispatched
):
    first = trigger(RecipientEntry(id="a"))
    welcome.is_active = False
    welcome.save()
    replay = trigger(RecipientEntry(id="a"))
    assert [(i.id, i.status) for i in replay.instances] == [(first.instances[0].id, "duplicate")]
    with pytest.raises(ApplicationError) as refused:
        trigger(RecipientEntry(id="a"), RecipientEntry(id="b"))
    assert refused.value.code == "inactive_workflow"


def test_a_replay_of_instances_another_key_created_is_a_conflict(welcome, dispatched):
    owner, _ = api_key_create(name="owner", scope=ApiKeyScope.TRIGGER)
    other, _ = api_key_create(name="other", scope=ApiKeyScope.TRIGGER)
    trigger(RecipientEntry(id="a"), api_key=owner)
    assert TriggerInstance.objects.get().created_by_key == "owner"
    with pytest.raises(ConflictError) as refused:
        trigger(RecipientEntry(id="a"), api_key=other)
    assert refused.value.code == "idempotency_conflict"
