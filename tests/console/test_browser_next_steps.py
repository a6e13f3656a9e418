"""What an operator needs next, on the console's pages in headless Chromium against
gunicorn with DEBUG off (as tests/console/test_browser.py runs it): a send to the
recipient names the address it uses in the graph, skipped steps say why (graph, step
logs, status history), batches say how they closed and who closed them, a failing
webhook endpoint shows its last error, and ids that differ only by whitespace or control
characters look different. Each page must fit the 1,400 px window; screenshots go to
var/screenshots/ (next-*.png)."""

from __future__ import annotations

from contextlib import ExitStack

from django.utils import timezone

from executions import engine
from gates import batches
from gates.models import Batch
from recipients.models import RecipientList
from status_webhooks import delivery
from status_webhooks.models import WebhookEndpoint
from status_webhooks.outbox import NewEvent, record
from tests.admin_helpers import make_superuser
from tests.console.test_browser import (
    assert_fits,
    assert_styled,
    chromium,
    full_page_screenshot,
    log_in,
    pytestmark,  # noqa: F401  (browser marker, and the skip when Chromium is missing)
    readme_web_server,
)
from tests.factories import (
    FanOutFactory,
    RecipientFactory,
    ThrottleCounterFactory,
    WorkflowFactory,
    batch_definition,
)
from tests.fake_http import FakeEndpoint
from triggers.models import TriggerInstance
from triggers.models.events import EventRecord
from triggers.models.fanouts import FanOut
from triggers.services import (
    RecipientEntry,
    instance_run_now,
    trigger_create,
    trigger_create_for_recipients,
)

ONBOARDING = {
    "entry_node_id": "welcome",
    "nodes": [
        {"id": "welcome", "type": "email", "config": {"subject": "Hi", "body": "Welcome"}},
        {"id": "nudge", "type": "sms", "config": {"body": "Finish signing up"}},
    ],
    "edges": [{"from": "welcome", "to": "nudge"}],
}
LOOKALIKES = ("user 42", "user\n42", "user 42 ", "user\u202e42")


def skipped_steps() -> tuple[TriggerInstance, FanOut]:
    """Ada opted out of email, and has no phone: both steps skip. And ids that differ
    only by whitespace or control characters: recipients and their instances' keys,
    list keys, fan-out keys, throttle subjects and keys, event ids."""
    RecipientFactory(id="ada", phone=None, preferences={"channels": {"email": False}})
    workflow = WorkflowFactory(key="onboarding", definition=ONBOARDING)
    made = trigger_create_for_recipients(
        workflow=workflow,
        idempotency_key="signup-ada ",
        payload={},
        recipients=[RecipientEntry(id="ada")],
    )
    instance = made.instances[0]
    engine.step_execute(instance_id=instance.id)
    engine.step_execute(instance_id=instance.id)
    for person in LOOKALIKES:
        RecipientFactory(id=person)
        trigger_create_for_recipients(
            workflow=workflow,
            idempotency_key=f"signup-{person}",
            payload={},
            recipients=[RecipientEntry(id=person)],
        )
    for key in ("weekly", "weekly ", "weekly\t"):
        RecipientList.objects.create(key=key, name="Weekly digest")
    fanout = FanOutFactory(workflow=workflow, idempotency_key="launch\n2026", lists=["weekly "])
    FanOutFactory(workflow=workflow, idempotency_key="launch 2026", lists=["weekly", "weekly\t"])
    ThrottleCounterFactory(scope="recipient", subject="user 42 ", key="promo\u200b")
    ThrottleCounterFactory(scope="recipient", subject="user 42", key="promo")
    for event_id in ("evt-1", "evt-1 ", "evt\x1b1"):
        EventRecord.objects.create(name="user.signed_up", event_id=event_id, context_sha256="0")
    return TriggerInstance.objects.get(pk=instance.id), fanout


def closed_batches() -> dict[str, Batch]:
    """A batch closed at its window's end, one filled to max_items, one released by an
    operator's run-now, one flushed in the console."""
    closed = {}
    for how, config in (
        ("window", {}),
        ("max_items", {"max_items": 3}),
        ("run_now", {}),
        ("flush", {}),
    ):
        workflow = WorkflowFactory(
            key=f"digest-{how.replace('_', '-')}",
            definition=batch_definition(window="1h", key="thread-7", **config),
        )
        made = [
            trigger_create(
                workflow=workflow,
                idempotency_key=f"{how}-{n}",
                payload={"email": "ada@example.com", "text": f"comment {n}"},
            ).instance
            for n in range(3)
        ]
        for instance in made:
            engine.step_execute(instance_id=instance.pk)
        batch = Batch.objects.get(opener=made[0])
        if how == "window":
            now = timezone.now()
            Batch.objects.filter(pk=batch.pk).update(closes_at=now)
            TriggerInstance.objects.filter(pk=made[0].pk).update(
                available_at=now, wait_deadline=now
            )
            engine.step_execute(instance_id=made[0].pk)
        elif how == "run_now":
            instance_run_now(instance_id=made[0].pk, actor="olive", reason="customer waiting")
            engine.step_execute(instance_id=made[0].pk)
        elif how == "flush":
            batches.flush(batch_id=batch.pk, actor="root")
        closed[how] = Batch.objects.get(pk=batch.pk)
    return closed


def failing_endpoint(receiver: FakeEndpoint) -> WebhookEndpoint:
    endpoint = WebhookEndpoint.objects.create(
        url=f"{receiver.url}/crm", description="CRM sync", event_types=["instance.completed"]
    )
    receiver.responses = [500, 503]
    record(events=[NewEvent("instance.completed", {"status": "completed"}, None, "onboarding")])
    delivery.deliver_due()
    endpoint.messages.update(next_attempt_at=timezone.now())
    delivery.deliver_due()
    endpoint.refresh_from_db()
    assert endpoint.failing_since is not None
    return endpoint


def test_next_step_pages_render_fit_and_are_screenshotted(tmp_path, settings, monkeypatch):
    from selenium.webdriver.common.by import By

    monkeypatch.setattr("status_webhooks.delivery.send_task_on_commit", lambda *a, **k: None)
    monkeypatch.setattr("status_webhooks.outbox.send_task_on_commit", lambda *a, **k: None)
    admin = make_superuser("root")
    stack = ExitStack()
    receiver = stack.enter_context(FakeEndpoint())
    settings.NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS = [f"127.0.0.1:{receiver.port}"]
    instance, fanout = skipped_steps()
    closed = closed_batches()
    endpoint = failing_endpoint(receiver)
    driver = chromium(tmp_path)

    def page(path: str, name: str, *expected: str) -> str:
        driver.get(f"{url}{path}")
        assert_styled(driver)
        text = driver.find_element(By.ID, "content").text
        for piece in expected:
            assert piece in text, (piece, text)
        full_page_screenshot(driver, f"next-{name}.png")
        assert_fits(driver)
        return text

    try:
        url = stack.enter_context(readme_web_server(tmp_path))
        log_in(driver, url, admin.username)

        text = page(
            f"/admin/triggers/triggerinstance/{instance.pk}/change/",
            "instance",
            "signup-ada·",
            "preference_opt_out rule channels.email",
            "(skipped: preference_opt_out, rule channels.email)",
            "(skipped: missing_channel_data)",
        )
        graph = driver.find_element(By.CSS_SELECTOR, "svg.nf-dag").text
        assert "to recipient.email" in graph and "to recipient.phone" in graph
        assert "preference_opt_out, rule" in graph and "missing_channel_data" in graph
        page(
            f"/admin/executions/stepexecutionlog/?trigger__id__exact={instance.pk}",
            "step-logs",
            "preference_opt_out rule channels.email",
            "missing_channel_data",
        )
        page(
            "/admin/gates/batch/",
            "batches",
            "its window ended",
            "max_items reached",
            "run now on its opener",
            "flushed by root",
        )
        page(
            f"/admin/gates/batch/{closed['run_now'].pk}/change/",
            "batch-run-now",
            "run now on its opener by olive, before its window's end",
        )
        page(
            f"/admin/gates/batch/{closed['max_items'].pk}/change/",
            "batch-max-items",
            "max_items reached (3 of 3): the arrival of",
        )
        page("/admin/status_webhooks/webhookendpoint/", "webhook-endpoints", "HTTP 503")
        text = page(
            f"/admin/status_webhooks/webhookendpoint/{endpoint.pk}/change/",
            "webhook-endpoint",
            "HTTP 503 at ",
            "(instance.completed message)",
        )
        text = page("/admin/recipients/recipient/", "recipients", "user\\n42", "user\\u202e42")
        assert "user 42·" in text
        page("/admin/recipients/recipient/user%2042%20/change/", "recipient", "user 42·")
        page(
            f"/admin/triggers/triggerinstance/?workflow__id__exact={instance.workflow_id}",
            "instances",
            "signup-user\\n42",
            "signup-user 42·",
        )
        page("/admin/recipients/recipientlist/", "lists", "weekly·", "weekly\\t")
        page("/admin/triggers/fanout/", "fanouts", "launch\\n2026", "weekly·", "weekly\\t")
        page(f"/admin/triggers/fanout/{fanout.pk}/change/", "fanout", "launch\\n2026 (running)")
        page("/admin/gates/throttlecounter/", "throttles", "user 42·", "promo\\u200b")
        page("/admin/triggers/eventrecord/", "events", "evt-1·", "evt\\x1b1")
        page(f"/admin/workflows/workflow/{instance.workflow_id}/change/", "workflow")
        graph = driver.find_element(By.CSS_SELECTOR, "svg.nf-dag").text
        assert "to recipient.email" in graph and "to recipient.phone" in graph
    finally:
        stack.close()
        driver.quit()
