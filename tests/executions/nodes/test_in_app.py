"""The ``in_app`` node through the engine (``step_execute``): it writes one feed item
for the instance's recipient, rendered, counted unread and unseen; a re-run writes
nothing twice; preferences (channel ``in_app``) skip it, critical workflows ignore
them, quiet hours and send windows do not hold it; without a recipient it is skipped
``missing_channel_data``; a preview writes nothing. Runs on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from executions import engine
from executions.models import SkipReason, StepExecutionLog
from executions.outcomes import StepOutcome
from executions.preview import workflow_preview
from feed.models import FeedItem
from feed.services import feed_counts
from tests.factories import (
    FeedWorkflowFactory,
    RecipientFactory,
    TriggerInstanceFactory,
    in_app_definition,
)
from triggers.models import TriggerInstance

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]
PAYLOAD = {"name": "Ada", "comment_id": 42}


@pytest.fixture(autouse=True)
def _public_url(settings):
    settings.NOTIFYFLOW_PUBLIC_URL = "https://notify.example.com"


def _instance(recipient=None, **workflow):
    return TriggerInstanceFactory(
        workflow=FeedWorkflowFactory(**workflow), recipient=recipient, payload=dict(PAYLOAD)
    )


def _bell_log(instance) -> StepExecutionLog:
    return StepExecutionLog.objects.get(trigger=instance, node_id="bell")


def test_the_node_writes_one_rendered_item_counted_unread_and_unseen(dispatched):
    person = RecipientFactory()
    instance = _instance(person)
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.ADVANCED
    item = FeedItem.objects.get()
    assert (item.recipient_id, item.instance_id, item.node_id) == (person.pk, instance.pk, "bell")
    assert item.workflow_id == instance.workflow_id
    assert item.title == "New comment from Ada"
    assert item.body == "Ada replied"
    assert item.url == "https://app.example.com/c/42"
    assert item.data == {"comment_id": "42", "kind": "comment"}
    assert item.category == "comments"  # the workflow's first category
    assert (item.seen_at, item.read_at, item.archived_at) == (None, None, None)
    counts = feed_counts(recipient_id=person.pk)
    assert (counts.unread_count, counts.unseen_count, counts.version) == (1, 1, 1)
    vars_ = TriggerInstance.objects.get(pk=instance.pk).vars["in_app_bell"]
    assert vars_["feed_item_id"] == str(item.pk)
    assert vars_["rule"] == "default"


def test_the_node_category_overrides_the_workflow_s(dispatched):
    person = RecipientFactory()
    instance = _instance(person, definition=in_app_definition(category="mentions"))
    engine.step_execute(instance_id=instance.pk)
    assert FeedItem.objects.get().category == "mentions"


def test_a_rerun_of_the_step_writes_no_second_item(dispatched):
    person = RecipientFactory()
    instance = _instance(person)
    engine.step_execute(instance_id=instance.pk)
    first = FeedItem.objects.get()
    # As if the worker died after the write, before the step was recorded: the
    # instance is back at the node and runs it again.
    TriggerInstance.objects.filter(pk=instance.pk).update(current_node_id="bell")
    engine.step_execute(instance_id=instance.pk)
    assert list(FeedItem.objects.values_list("pk", flat=True)) == [first.pk]
    counts = feed_counts(recipient_id=person.pk)
    assert (counts.unread_count, counts.unseen_count) == (1, 1)
    logs = StepExecutionLog.objects.filter(trigger=instance, node_id="bell")
    assert {log.output["feed_item_id"] for log in logs} == {str(first.pk)}


def test_an_opt_out_of_in_app_skips_the_node_and_writes_nothing(dispatched):
    person = RecipientFactory(preferences={"channels": {"in_app": False}})
    instance = _instance(person)
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.ADVANCED
    log = _bell_log(instance)
    assert log.skip_reason == SkipReason.PREFERENCE_OPT_OUT
    assert log.output == {
        "skipped": True,
        "reason": "preference_opt_out",
        "rule": "channels.in_app",
    }
    assert not FeedItem.objects.exists()


def test_a_category_opt_out_of_in_app_skips_it_but_not_the_email(dispatched):
    person = RecipientFactory(
        preferences={"categories": {"comments": {"channels": {"in_app": False}}}}
    )
    instance = _instance(person)
    engine.step_execute(instance_id=instance.pk)
    engine.step_execute(instance_id=instance.pk)
    assert _bell_log(instance).output["rule"] == "categories.comments.channels.in_app"
    mail = StepExecutionLog.objects.get(trigger=instance, node_id="mail")
    assert mail.success and mail.skip_reason == ""


def test_a_critical_workflow_ignores_the_opt_out(dispatched):
    person = RecipientFactory(preferences={"channels": {"in_app": False}})
    instance = _instance(person, critical=True)
    engine.step_execute(instance_id=instance.pk)
    assert FeedItem.objects.filter(recipient=person).count() == 1


def test_quiet_hours_and_send_windows_do_not_hold_the_item(dispatched):
    # Quiet all day, every day: an email would be deferred; the feed item is written now.
    person = RecipientFactory(preferences={"quiet_hours": {"from": "00:00", "until": "23:59"}})
    definition = in_app_definition()
    instance = _instance(person, definition=definition)
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.ADVANCED
    assert FeedItem.objects.filter(recipient=person).count() == 1


def test_without_a_recipient_the_node_is_skipped_missing_channel_data(dispatched):
    instance = _instance(None)
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.ADVANCED
    log = _bell_log(instance)
    assert log.skip_reason == SkipReason.MISSING_CHANNEL_DATA
    assert not FeedItem.objects.exists()


def test_a_title_rendering_empty_fails_the_step_permanently(dispatched):
    person = RecipientFactory()
    instance = _instance(person, definition=in_app_definition(title="{{ payload.missing }}"))
    outcome = engine.step_execute(instance_id=instance.pk)
    assert not StepExecutionLog.objects.get(trigger=instance).success
    assert outcome.startswith("failed")
    assert not FeedItem.objects.exists()


@pytest.mark.parametrize(
    "url", ["javascript:alert(document.cookie)", "data:text/html,<script>x</script>", "//evil.test"]
)
def test_a_url_rendering_to_another_scheme_fails_the_step_permanently_naming_node_and_field(
    dispatched, url
):
    # Valid at save (the scheme comes from the payload); refused when it renders: the
    # item is never written, so no person is shown the link (issue 39 item 4).
    person = RecipientFactory()
    definition = in_app_definition(url="{{ payload.link }}")
    instance = TriggerInstanceFactory(
        workflow=FeedWorkflowFactory(definition=definition),
        recipient=person,
        payload={**PAYLOAD, "link": url},
    )
    outcome = engine.step_execute(instance_id=instance.pk)
    assert outcome.startswith("failed")
    log = _bell_log(instance)
    assert not log.success and log.error.startswith("url: must be an http(s) URL or a relative")
    instance.refresh_from_db()
    assert instance.status == "failed"
    assert "bell" in instance.last_error and "url:" in instance.last_error
    assert not FeedItem.objects.exists()


def test_a_url_rendering_to_a_relative_path_is_written():
    person = RecipientFactory()
    definition = in_app_definition(url="/c/{{ payload.comment_id }}")
    instance = TriggerInstanceFactory(
        workflow=FeedWorkflowFactory(definition=definition), recipient=person, payload=PAYLOAD
    )
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.ADVANCED
    assert FeedItem.objects.get().url == "/c/42"


def test_a_preview_shows_the_item_and_writes_nothing():
    workflow = FeedWorkflowFactory()
    preview = workflow_preview(key=workflow.key, payload=dict(PAYLOAD))
    bell = preview["nodes"][0]
    assert bell["output"]["feed_item_id"] is None
    assert bell["output"]["title"] == "New comment from Ada"
    assert not FeedItem.objects.exists()


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_writes_one_item_even_when_the_step_runs_again(tmp_path):
    from django.utils import timezone

    from tests.worker import celery_worker, flush_broker, wait_until
    from triggers.dispatch import dispatch_on_commit
    from triggers.models import TriggerStatus

    def completed(instance) -> bool:
        return TriggerInstance.objects.filter(
            pk=instance.pk, status=TriggerStatus.COMPLETED
        ).exists()

    flush_broker()
    person = RecipientFactory()
    instance = _instance(person)
    with celery_worker(tmp_path, NOTIFYFLOW_PUBLIC_URL="https://notify.example.com"):
        dispatch_on_commit(instance.pk, lane=instance.lane)
        wait_until(lambda: completed(instance), timeout=120, what="instance to complete")
        (item,) = FeedItem.objects.filter(recipient=person)
        # As if the worker had died after the item's write and before recording the
        # step: the instance is due at the in_app node again, and a worker runs it.
        TriggerInstance.objects.filter(pk=instance.pk).update(
            status=TriggerStatus.ENQUEUED,
            current_node_id="bell",
            finished_at=None,
            available_at=timezone.now(),
        )
        dispatch_on_commit(instance.pk, lane=instance.lane)
        wait_until(lambda: completed(instance), timeout=120, what="the re-run to complete")
    assert list(FeedItem.objects.filter(recipient=person).values_list("pk", flat=True)) == [item.pk]
    counts = feed_counts(recipient_id=person.pk)
    assert (counts.unread_count, counts.unseen_count, counts.version) == (1, 1, 1)
    runs = StepExecutionLog.objects.filter(trigger=instance, node_id="bell")
    assert runs.count() == 2
    assert {log.output["feed_item_id"] for log in runs} == {str(item.pk)}
