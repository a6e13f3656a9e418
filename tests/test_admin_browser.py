"""End to end in headless Chromium: an operator logs in, finds a failed instance, reads
its step logs and graph, clicks Retry, and watches a real Celery worker complete it."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from executions.engine import step_execute
from executions.providers.base import ProviderError
from executions.providers.sms import BaseSmsBackend, SmsMessage, SmsSendResult
from triggers.models import TriggerInstance, TriggerStatus, TriggerStatusChange
from triggers.services import trigger_create

from .admin_helpers import PASSWORD, make_operator
from .factories import PAYLOAD, WorkflowFactory, email_sms_definition
from .worker import ROOT, celery_worker, flush_broker, sent_sms

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
IN_CI = os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}
MISSING = [path for path in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(path)]
SCREENSHOTS = ROOT / "var" / "screenshots"

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]
if MISSING and not IN_CI:
    # In CI (.ci/run installs them) a missing browser is a failure, never a skip.
    pytestmark.append(
        pytest.mark.skip(
            reason=f"needs {' and '.join(MISSING)}: apt-get install chromium chromium-driver"
        )
    )


class RejectingSmsBackend(BaseSmsBackend):
    """The provider rejects the number (permanent): used in-process only, so the
    worker started later (SMS_BACKEND=file) succeeds on the operator's retry."""

    def send(self, message: SmsMessage) -> SmsSendResult:
        raise ProviderError("Twilio 400 (code 21211): invalid 'To' phone number", permanent=True)


def chromium(tmp_path: Path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1400,1000",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    return driver


def full_page_screenshot(driver, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, min(max(height, 800), 6000))
    path = SCREENSHOTS / name
    assert driver.save_screenshot(str(path))
    driver.set_window_size(1400, 1000)
    return path


def instance_failed_on_its_sms_step(settings) -> TriggerInstance:
    """Create an instance and drive it, in this process, through its email step and a
    permanently failing SMS step: the state the operator finds it in."""
    settings.SMS_BACKEND = f"{__name__}.RejectingSmsBackend"
    workflow = WorkflowFactory(
        key="welcome-series", name="Welcome series", definition=email_sms_definition()
    )
    instance = trigger_create(
        workflow=workflow.key, idempotency_key="signup-42", payload=PAYLOAD
    ).instance
    assert step_execute(instance_id=instance.pk, worker="pytest") == "advanced"
    assert step_execute(instance_id=instance.pk, worker="pytest") == "failed:permanent"
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.FAILED and instance.current_node_id == "text"
    # Drop the task messages those steps queued: the worker starts with an empty broker.
    flush_broker()
    return instance


def test_operator_retries_a_failed_instance_and_sees_it_complete(live_server, settings, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    flush_broker()
    operator = make_operator("olive")
    instance = instance_failed_on_its_sms_step(settings)
    short_id = str(instance.pk)[:8]

    driver = chromium(tmp_path)
    wait = WebDriverWait(driver, 15)
    try:
        driver.get(f"{live_server.url}/admin/login/?next=/admin/")
        driver.find_element(By.NAME, "username").send_keys(operator.username)
        driver.find_element(By.NAME, "password").send_keys(PASSWORD)
        driver.find_element(By.CSS_SELECTOR, "input[type=submit]").click()

        # The front page overview counts the failure.
        wait.until(ec.presence_of_element_located((By.ID, "nf-overview")))
        assert driver.find_element(By.ID, "nf-count-failed").text == "1"
        assert driver.find_element(By.ID, "nf-failed-last-hour").text == "1"
        full_page_screenshot(driver, "admin-index.png")

        # Overview -> failed instances -> the instance.
        driver.find_element(By.LINK_TEXT, "Failed").click()
        wait.until(ec.presence_of_element_located((By.LINK_TEXT, short_id))).click()
        wait.until(ec.presence_of_element_located((By.ID, "nf-retry")))

        # Step logs: the email went out, the SMS was rejected.
        logs = driver.find_element(By.ID, "step_logs-group").text
        assert "hello" in logs and "text" in logs
        assert "invalid 'To' phone number" in logs
        history = driver.find_element(By.ID, "status_changes-group").text
        assert "permanent error" in history
        # The graph: email node executed, SMS node failed and current.
        driver.find_element(By.CSS_SELECTOR, 'svg.nf-dag g.nf-node-succeeded[data-node-id="hello"]')
        driver.find_element(
            By.CSS_SELECTOR, 'svg.nf-dag g.nf-node-failed.nf-node-current[data-node-id="text"]'
        )
        full_page_screenshot(driver, "admin-instance-failed.png")

        with celery_worker(tmp_path):
            driver.find_element(By.ID, "nf-retry").click()
            wait.until(
                ec.text_to_be_present_in_element(
                    (By.CSS_SELECTOR, "ul.messagelist"), "Retry scheduled"
                )
            )
            deadline = time.monotonic() + 45
            while not driver.find_elements(
                By.CSS_SELECTOR, ".field-status_display .nf-status-completed"
            ):
                assert time.monotonic() < deadline, "instance did not complete in 45s"
                time.sleep(0.5)
                driver.refresh()

        # Completed: both nodes executed, no current node, the retry audited.
        assert not driver.find_elements(By.ID, "nf-retry")
        driver.find_element(By.CSS_SELECTOR, 'svg.nf-dag g.nf-node-succeeded[data-node-id="text"]')
        assert not driver.find_elements(By.CSS_SELECTOR, "svg.nf-dag g.nf-node-current")
        history = driver.find_element(By.ID, "status_changes-group").text
        assert "retried by operator" in history and operator.username in history
        shot = full_page_screenshot(driver, "admin-instance.png")
        assert shot.stat().st_size > 10_000
    finally:
        driver.quit()

    instance.refresh_from_db()
    assert instance.status == TriggerStatus.COMPLETED
    retry = TriggerStatusChange.objects.get(
        instance=instance, from_status="failed", to_status="enqueued"
    )
    assert retry.actor == operator.username
    assert sent_sms(tmp_path) == {f"{instance.pk}:text": 1}
