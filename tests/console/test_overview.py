"""Operator console: the overview on the admin index."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.http import HttpRequest
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from console.overview import console_overview_get, format_age
from tests.admin_helpers import PASSWORD, make_operator
from tests.factories import TriggerInstanceFactory
from triggers.models import TriggerStatus

pytestmark = pytest.mark.django_db


@pytest.fixture
def queue():
    now = timezone.now()
    S = TriggerStatus
    TriggerInstanceFactory(available_at=now - timedelta(minutes=7))  # due, oldest
    TriggerInstanceFactory(available_at=now - timedelta(seconds=30))  # due
    TriggerInstanceFactory(available_at=now + timedelta(hours=1))  # delayed: not backlog
    TriggerInstanceFactory(
        status=S.PROCESSING,
        lease_token=uuid.uuid4(),
        locked_until=now + timedelta(seconds=60),
        locked_by="w1",
        available_at=now - timedelta(hours=3),
    )
    for _ in range(3):
        TriggerInstanceFactory(status=S.COMPLETED, current_node_id=None, finished_at=now)
    TriggerInstanceFactory(status=S.FAILED, finished_at=now - timedelta(minutes=10))
    TriggerInstanceFactory(status=S.FAILED, finished_at=now - timedelta(hours=2))
    TriggerInstanceFactory(status=S.CANCELLED, current_node_id=None, finished_at=now)
    return now


def test_overview_numbers(queue):
    overview = console_overview_get(now=queue)
    assert {row.status: row.count for row in overview.status_counts} == {
        "enqueued": 3,
        "processing": 1,
        "completed": 3,
        "failed": 2,
        "cancelled": 1,
    }
    assert overview.total == 10
    assert overview.failed_last_hour == 1
    assert overview.backlog == 2
    assert overview.oldest_backlog_age == timedelta(minutes=7)


def test_overview_of_an_empty_queue():
    overview = console_overview_get()
    assert overview.total == 0 and overview.backlog == 0
    assert overview.oldest_backlog_at is None and overview.oldest_backlog_age is None


def test_overview_is_a_few_queries(queue):
    with CaptureQueriesContext(connection) as queries:
        console_overview_get()
    # Each an index read: enqueued (trigger_due_enqueued), processing
    # (trigger_lease_processing), failed and cancelled (trigger_finished_status), the
    # estimate or the completed count, failed in the last hour.
    assert len(queries) <= 6


def test_completed_is_estimated_on_a_huge_table(queue, monkeypatch):
    from console import overview as overview_module

    monkeypatch.setattr(overview_module, "table_row_estimate", lambda model: 2_000_007)
    with CaptureQueriesContext(connection) as queries:
        overview = console_overview_get(now=queue)
    counts = {row.status: (row.count, row.approximate) for row in overview.status_counts}
    # 2,000,006 rows in all minus the 6 enqueued/processing/failed ones counted exactly.
    assert counts == {
        "enqueued": (3, False),
        "processing": (1, False),
        "failed": (2, False),
        "cancelled": (1, False),
        "completed": (2_000_000, True),
    }
    # No query touches the completed rows.
    assert not [q for q in queries.captured_queries if "'completed'" in q["sql"]]


def test_admin_index_shows_the_overview_to_operators(queue):
    client = Client()
    client.login(request=HttpRequest(), username=make_operator().username, password=PASSWORD)
    body = client.get(reverse("admin:index")).content.decode()
    assert '<td class="nf-num" id="nf-count-enqueued">3</td>' in body
    assert '<td class="nf-num" id="nf-count-completed">3</td>' in body
    assert 'id="nf-failed-last-hour">1</td>' in body
    assert '<td class="nf-num" id="nf-backlog">2</td>' in body
    assert 'id="nf-backlog-age">7m' in body
    # The stock app list is still there.
    assert "Trigger instances" in body and "app-workflows" in body


def test_admin_index_hides_the_overview_without_view_permission(queue, django_user_model):
    django_user_model.objects.create_user("staff", password=PASSWORD, is_staff=True)
    client = Client()
    client.login(request=HttpRequest(), username="staff", password=PASSWORD)
    body = client.get(reverse("admin:index")).content.decode()
    assert 'id="nf-overview"' not in body and "nf-count-enqueued" not in body


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (12, "12s"),
        (245, "4m 05s"),
        (3 * 3600 + 60, "3h 01m"),
        (2 * 86400 + 3 * 3600, "2d 3h"),
    ],
)
def test_format_age(seconds, text):
    assert format_age(timedelta(seconds=seconds)) == text
