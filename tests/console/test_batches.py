"""Operator console: batches with their members, and the "Flush now" action."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.admin import helpers
from django.http import HttpRequest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from tests.admin_helpers import PASSWORD, make_operator, make_superuser
from tests.factories import BatchInstanceFactory, BatchWorkflowFactory
from triggers.gate_models import Batch
from triggers.gates import batches

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:triggers_batch_changelist"


def logged_in(user) -> Client:
    client = Client()
    client.login(request=HttpRequest(), username=user.username, password=PASSWORD)
    return client


def _open(n=3, key=""):
    instances = BatchInstanceFactory.create_batch(n, workflow=BatchWorkflowFactory())
    for instance in instances:
        batches.arrive(
            instance_id=instance.pk,
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
    detail = client.get(reverse("admin:triggers_batch_change", args=[batch.pk]))
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
