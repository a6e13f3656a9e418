"""The status webhook pages of the console in headless Chromium, against gunicorn with
DEBUG off (as tests/console/test_browser.py runs it): an endpoint added in the form with
its secret shown once, the endpoints list (one disabled after 5 days of failures), an
endpoint with its audit trail, the Replay form, the messages list and a message with its
attempts. Each page must fit the 1,400 px window; screenshots go to var/screenshots/
(webhooks-*.png)."""

from __future__ import annotations

import uuid
from contextlib import ExitStack
from datetime import timedelta

from django.utils import timezone

from status_webhooks import delivery
from status_webhooks.endpoints import endpoint_create, secret_rotate
from status_webhooks.models import WebhookEndpoint, WebhookMessage
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
from tests.factories import WorkflowFactory
from tests.fake_http import FakeEndpoint

HOST = "hooks.example.com"


def webhooks(receiver: FakeEndpoint) -> tuple[WebhookEndpoint, WebhookMessage]:
    """A healthy endpoint with delivered, retried and failed messages, and one disabled
    after 5 days of failures (its failure audited by the system)."""
    WorkflowFactory(key="welcome")
    healthy = endpoint_create(
        url=f"{receiver.url}/notifyflow",
        description="billing service",
        event_types=["instance.completed", "instance.failed", "delivery.*"],
        workflows=["welcome"],
        actor="admin:root",
    )
    secret_rotate(endpoint=healthy, actor="api:deploy-bot")
    receiver.responses = [200, 503, 200, 500]
    instance_id = uuid.uuid4()
    record(
        events=[
            NewEvent(
                "delivery.sent", {"node_id": "email", "channel": "email"}, instance_id, "welcome"
            ),
            NewEvent(
                "delivery.delivered",
                {"node_id": "email", "channel": "email"},
                instance_id,
                "welcome",
            ),
            NewEvent("instance.completed", {"status": "completed"}, instance_id, "welcome"),
        ]
    )
    delivery.deliver_due()
    retried = WebhookMessage.objects.filter(status="pending").first()
    assert retried is not None
    WebhookMessage.objects.filter(pk=retried.pk).update(next_attempt_at=timezone.now())
    delivery.deliver_due()
    broken = endpoint_create(
        url=f"https://{HOST}/gone",
        description="old CRM",
        event_types=["recipient.unsubscribed"],
        actor="api:deploy-bot",
    )
    WebhookEndpoint.objects.filter(pk=broken.pk).update(
        failing_since=timezone.now() - timedelta(days=5, minutes=1)
    )
    broken.refresh_from_db()
    delivery.endpoint_failure_record(endpoint=broken, now=timezone.now())
    return healthy, retried


def test_webhook_pages_render_fit_and_are_screenshotted(tmp_path, settings, monkeypatch):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    monkeypatch.setattr("status_webhooks.delivery.send_task_on_commit", lambda *a, **k: None)
    monkeypatch.setattr("status_webhooks.outbox.send_task_on_commit", lambda *a, **k: None)
    admin = make_superuser("root")
    stack = ExitStack()
    receiver = stack.enter_context(FakeEndpoint())
    allowed = f"{HOST},127.0.0.1:{receiver.port}"
    settings.NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS = allowed.split(",")
    monkeypatch.setenv("NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS", allowed)  # gunicorn's too
    healthy, retried = webhooks(receiver)
    driver = chromium(tmp_path)
    try:
        url = stack.enter_context(readme_web_server(tmp_path))
        log_in(driver, url, admin.username)
        WebDriverWait(driver, 60).until(lambda d: d.find_elements(By.ID, "user-tools"))

        driver.get(f"{url}/admin/status_webhooks/webhookendpoint/add/")
        assert_styled(driver)
        driver.find_element(By.NAME, "url").send_keys(f"https://{HOST}/hooks/notifyflow")
        driver.find_element(By.NAME, "description").send_keys("data warehouse")
        for value in ("instance.completed", "batch.closed"):
            driver.find_element(By.CSS_SELECTOR, f"input[value='{value}']").click()
        Select(driver.find_element(By.NAME, "workflows")).select_by_value("welcome")
        driver.find_element(By.NAME, "_save").click()
        notes = (
            WebDriverWait(driver, 60)
            .until(lambda d: d.find_element(By.CSS_SELECTOR, "ul.messagelist"))
            .text
        )
        added = WebhookEndpoint.objects.get(description="data warehouse")
        assert added.secret in notes and "not shown again" in notes
        table = driver.find_element(By.ID, "result_list").text
        assert "billing service" in table and "old CRM" in table and "disabled" in table
        full_page_screenshot(driver, "webhooks-endpoints.png")
        assert_fits(driver)

        driver.get(f"{url}/admin/status_webhooks/webhookendpoint/{healthy.pk}/change/")
        assert_styled(driver)
        page = driver.find_element(By.ID, "content").text
        assert "secret_rotated" in page and "api:deploy-bot" in page
        assert healthy.secret not in driver.page_source
        # Every event type's checkbox and name stay on one line, the longest included.
        heights = driver.execute_script(
            "return [...document.querySelectorAll('#id_event_types label')]"
            ".map(l => l.getBoundingClientRect().height)"
        )
        assert len(heights) > 10 and max(heights) < 1.5 * min(heights), heights
        full_page_screenshot(driver, "webhooks-endpoint.png")
        assert_fits(driver)

        driver.get(f"{url}/admin/status_webhooks/webhookendpoint/")
        driver.find_element(By.CSS_SELECTOR, f"input[value='{healthy.pk}']").click()
        Select(driver.find_element(By.NAME, "action")).select_by_value("replay")
        driver.find_element(By.NAME, "index").click()
        WebDriverWait(driver, 60).until(lambda d: d.find_element(By.NAME, "since"))
        assert "billing service" not in driver.find_element(By.ID, "nf-replay-endpoints").text
        full_page_screenshot(driver, "webhooks-replay.png")

        driver.get(f"{url}/admin/status_webhooks/webhookmessage/")
        assert_styled(driver)
        table = driver.find_element(By.ID, "result_list").text
        assert "delivery.delivered" in table and "Delivered" in table and "Pending" in table
        full_page_screenshot(driver, "webhooks-messages.png")
        assert_fits(driver)

        driver.get(f"{url}/admin/status_webhooks/webhookmessage/{retried.pk}/change/")
        assert_styled(driver)
        page = driver.find_element(By.ID, "content").text
        assert "503" in page and "attempts (oldest first)" in page.lower()
        full_page_screenshot(driver, "webhooks-message.png")
        assert_fits(driver)
    finally:
        driver.quit()
        stack.close()
