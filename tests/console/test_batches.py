"""Operator console: batches with their members, how each closed (window, max_items,
flush, run-now, and by whom), and the "Flush now" action."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.admin import helpers
from django.http import HttpRequest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from executions import engine
from gates import batches
from gates.models import Batch
from notifyflow.ids import short_id
from tests.admin_helpers import PASSWORD, make_operator, make_superuser
from tests.factories import (
    PAYLOAD,
    BatchInstanceFactory,
    BatchWorkflowFactory,
    WorkflowFactory,
    batch_definition,
)
from triggers.models import TriggerInstance
from triggers.services import instance_run_now, trigger_create

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:gates_batch_changelist"


def logged_in(user) -> Client:
    client = Client()
    client.login(request=HttpRequest(), username=user.username, password=PASSWORD)
    return client


def _open(n=3, key=""):
    instances = BatchInstanceFactory.create_batch(n, workflow=BatchWorkflowFactory())
    for instance in instances:
        batches.arrive(
            instance_id=instance.pk,
            workflow_id=instance.workflow_id,
            recipient_id=instance.recipient_id,
            node_id="collect",
            key=key,
            window=timedelta(minutes=1),
            max_items=None,
            now=timezone.now(),
        )
    return Batch.objects.get(opener=instances[0]), instances


def test_changelist_and_detail_show_the_batch_and_its_members():
    batch, instances = _open(key="thread-7")
    client = logged_in(make_operator())
    body = client.get(reverse(CHANGELIST)).content.decode()
    assert "thread-7" in body and "Open" in body and batch.workflow.key in body
    filtered = client.get(reverse(CHANGELIST), {"status__exact": "closed"}).content.decode()
    assert "thread-7" not in filtered
    detail = client.get(reverse("admin:gates_batch_change", args=[batch.pk]))
    assert detail.status_code == 200
    page = detail.content.decode()
    for instance in instances:
        assert reverse("admin:triggers_triggerinstance_change", args=[instance.pk]) in page
    assert "Flush now" in client.get(reverse(CHANGELIST)).content.decode()


def test_flush_now_closes_open_batches_and_skips_closed_ones(dispatched):
    batch, _ = _open()
    closed, _ = _open()
    batches.flush(batch_id=closed.pk, actor="t")
    client = logged_in(make_superuser())
    response = client.post(
        reverse(CHANGELIST),
        {"action": "flush_now", helpers.ACTION_CHECKBOX_NAME: [str(batch.pk), str(closed.pk)]},
        follow=True,
    )
    assert response.status_code == 200
    body = response.content.decode()
    assert "Flushed 1 batch(es)" in body and "1 batch(es) not open, skipped." in body
    batch.refresh_from_db()
    assert batch.status == "closed"


def _engine_batch(n, **config):
    """``n`` instances of a batch workflow (``config``: window, max_items) through the
    engine: the first opens the batch, the others join it."""
    workflow = WorkflowFactory(definition=batch_definition(**{"window": "1h", **config}))
    made = [
        trigger_create(
            workflow=workflow, idempotency_key=f"c{i}", payload={**PAYLOAD, "text": f"c{i}"}
        ).instance
        for i in range(n)
    ]
    for instance in made:
        engine.step_execute(instance_id=instance.pk)
    return made


def _page(client, batch) -> str:
    """The batch page's HTML, whitespace folded."""
    response = client.get(reverse("admin:gates_batch_change", args=[batch.pk]))
    assert response.status_code == 200
    return " ".join(response.content.decode().split())


def _closed_how(page: str) -> str:
    """The text of the page's "closed how" field."""
    found = re.search(r'field-closed_how_details">.*?<div class="readonly">(.*?)</div>', page)
    assert found is not None
    return re.sub(r"<[^>]+>", "", found.group(1))


def test_the_batch_pages_say_how_each_batch_closed_and_who_closed_it(dispatched):
    client = logged_in(make_superuser())
    # At its window's end: the opener closes it.
    opener, _ = _engine_batch(2)
    now = timezone.now()
    window = Batch.objects.get(opener=opener)
    Batch.objects.filter(pk=window.pk).update(closes_at=now)
    TriggerInstance.objects.filter(pk=opener.pk).update(available_at=now, wait_deadline=now)
    engine.step_execute(instance_id=opener.pk)
    # Filled: the second arrival reaches max_items.
    first, filler = _engine_batch(2, max_items=2)
    filled = Batch.objects.get(opener=first)
    # An operator's run-now releases the opener before the window's end.
    released, _ = _engine_batch(2)
    instance_run_now(instance_id=released.pk, actor="ops-alice", reason="ship it")
    engine.step_execute(instance_id=released.pk)
    run_now = Batch.objects.get(opener=released)
    # Flushed from the console by an operator.
    flushed, _ = _open()
    client.post(
        reverse(CHANGELIST),
        {"action": "flush_now", helpers.ACTION_CHECKBOX_NAME: [str(flushed.pk)]},
    )

    recorded = {
        batch.pk: (batch.status, batch.close_reason, batch.closed_by)
        for batch in Batch.objects.all()
    }
    assert recorded == {
        window.pk: ("closed", "window", "engine"),
        filled.pk: ("closed", "max_items", None),
        run_now.pk: ("closed", "run_now", "engine"),
        flushed.pk: ("closed", "flush", "root"),
    }
    assert (
        _closed_how(_page(client, window)) == "its window ended (the opener continued at its end)"
    )
    page = _page(client, filled)
    assert (
        _closed_how(page)
        == f"max_items reached (2 of 2): the arrival of {short_id(filler.pk)} filled it"
    )
    assert reverse("admin:triggers_triggerinstance_change", args=[filler.pk]) in page
    assert (
        _closed_how(_page(client, run_now))
        == "run now on its opener by ops-alice, before its window's end"
    )
    assert _closed_how(_page(client, flushed)) == "flushed by root"

    listed = " ".join(client.get(reverse(CHANGELIST)).content.decode().split())
    for text in ("its window ended", "max_items reached", "run now on its opener", "flushed by"):
        assert f'<div class="nf-closed-how">{text}' in listed


def test_a_batch_closed_before_the_reason_was_recorded_says_so():
    client = logged_in(make_superuser())
    old, _ = _open()
    filled, _ = _open(n=2)
    cancelled, _ = _open()
    now = timezone.now()
    Batch.objects.filter(pk=old.pk).update(status="closed", closed_at=now)
    Batch.objects.filter(pk=filled.pk).update(status="closed", closed_at=now, max_items=2)
    Batch.objects.filter(pk=cancelled.pk).update(status="cancelled", closed_at=now)
    assert _closed_how(_page(client, old)) == "not recorded (closed before the reason was kept)"
    assert (
        _closed_how(_page(client, filled)) == "max_items reached (not recorded: its count says so)"
    )
    assert _closed_how(_page(client, cancelled)) == "its opener was cancelled"


def test_a_scheduled_batch_is_listed_open_and_flushed_like_the_others(dispatched):
    opener, member = _engine_batch(2, window=None, schedule={"cron": "0 9 * * 1-5"})
    batch = Batch.objects.get(opener=opener)
    client = logged_in(make_superuser())
    body = client.get(reverse(CHANGELIST), {"status__exact": "open"}).content.decode()
    assert short_id(batch.pk) in body
    client.post(
        reverse(CHANGELIST),
        {"action": "flush_now", helpers.ACTION_CHECKBOX_NAME: [str(batch.pk)]},
        follow=True,
    )
    batch.refresh_from_db()
    assert batch.status == "closed"
    assert TriggerInstance.objects.get(pk=member.pk).status == "completed"
