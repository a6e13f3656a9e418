"""Erasing a list member during and after a fan-out (triggers.fanout_forget): the
snapshot and the exclusions no longer hold the person's id; a resumed job starts at the
same next member and creates nobody twice or for the erased person; a finished one still
adds up."""

from __future__ import annotations

import pytest

from executions.erasure import recipient_erase
from recipients.models import ListMembership, Recipient, RecipientList
from tests.factories import PAYLOAD, WorkflowFactory
from tests.triggers.test_fanout import Killed, killed_while_writing_batch
from triggers import fanout
from triggers.models import TriggerInstance
from triggers.models.fanouts import FanOut
from triggers.services import RecipientEntry, trigger_create_for_recipients

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]


@pytest.fixture
def sent(monkeypatch):
    """The fan-out jobs the code sends (after commit), by id."""
    jobs: list[str] = []
    monkeypatch.setattr(
        "triggers.fanout_forget.send_task_on_commit", lambda name, job: jobs.append(job)
    )
    monkeypatch.setattr("triggers.fanout.send_task_on_commit", lambda name, job: None)
    return jobs


def _start(ids: list[str], *inline: str) -> FanOut:
    WorkflowFactory(key="news")
    group = RecipientList.objects.create(key="all")
    Recipient.objects.bulk_create([Recipient(id=rid, email=f"{rid}@example.com") for rid in ids])
    ListMembership.objects.bulk_create(
        [ListMembership(list=group, recipient_id=rid) for rid in ids]
    )
    entries = [RecipientEntry(list_key="all"), *(RecipientEntry(id=rid) for rid in inline)]
    result = trigger_create_for_recipients(
        workflow="news", idempotency_key="issue", payload=PAYLOAD, recipients=entries
    )
    assert result.fanout is not None
    return result.fanout


def _created() -> list[str]:
    rows = TriggerInstance.objects.filter(idempotency_key="issue", recipient__isnull=False)
    return sorted(rows.values_list("recipient_id", flat=True))


def _killed_after_one_batch(monkeypatch, job: FanOut, batch: int) -> FanOut:
    """Run ``job`` until its first batch committed, then lose its worker (its lease is
    still held)."""
    killed_while_writing_batch(monkeypatch, 2)
    with pytest.raises(Killed):
        fanout.fanout_run(fanout_id=job.pk, batch=batch)
    job.refresh_from_db()
    assert job.locked_until is not None and job.position == batch
    return job


def test_a_member_not_reached_yet_is_left_out_and_the_job_resumes_without_them(
    dispatched, sent, monkeypatch
):
    job = _killed_after_one_batch(monkeypatch, _start(["a", "b", "carol", "d"]), batch=2)
    assert job.recipient_ids == ["a", "b", "carol", "d"]
    recipient_erase(recipient_id="carol", actor="test")
    job.refresh_from_db()
    assert job.recipient_ids == ["a", "b", "d"]
    # The same next member; it never expects carol now; its lease taken back and the
    # job sent again (a worker still running it would stop at its next batch).
    assert (job.position, job.expected, job.locked_until) == (2, 3, None)
    assert sent == [str(job.pk)]
    assert fanout.fanout_run(fanout_id=job.pk, batch=2) == "done"
    job.refresh_from_db()
    assert _created() == ["a", "b", "d"]
    assert job.created + job.duplicates == job.expected == 3


def test_a_member_already_created_moves_the_position_back(dispatched, sent, monkeypatch):
    job = _killed_after_one_batch(monkeypatch, _start(["a", "b", "carol", "d"]), batch=3)
    recipient_erase(recipient_id="carol", actor="test")
    job.refresh_from_db()
    assert job.recipient_ids == ["a", "b", "d"]
    assert (job.position, job.expected) == (2, 4)
    assert fanout.fanout_run(fanout_id=job.pk) == "done"
    job.refresh_from_db()
    assert _created() == ["a", "b", "d"]
    assert job.created + job.duplicates == job.expected == 4


def test_a_job_that_has_not_read_the_membership_never_sees_the_erased_member(dispatched, sent):
    job = _start(["a", "carol"], "zed")
    assert job.recipient_ids is None and job.excluded == ["zed"]
    recipient_erase(recipient_id="carol", actor="test")
    recipient_erase(recipient_id="zed", actor="test")
    job.refresh_from_db()
    assert job.excluded == []
    assert fanout.fanout_run(fanout_id=job.pk) == "done"
    job.refresh_from_db()
    assert job.recipient_ids == ["a"]
    assert _created() == ["a"]
