"""End to end in headless Chromium against the app run the way the README runs it:
``collectstatic``, then gunicorn with DEBUG off (any stylesheet or script that does not
load fails the test). An operator finds failed instances and why they failed in the
list, retries one and - for a render error - retries on the latest workflow version,
and watches a real Celery worker complete them; a waiting instance shows its deadline;
the API docs load their assets from our own static files. Screenshots go to
var/screenshots/."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import timedelta
from pathlib import Path

import pytest

from executions.engine import step_execute
from executions.outcomes import StepOutcome
from executions.providers.base import ProviderError
from executions.providers.sms import BaseSmsBackend, SmsMessage, SmsSendResult
from notifyflow import ids
from tests.admin_helpers import PASSWORD, make_operator
from tests.factories import PAYLOAD, WorkflowFactory, email_sms_definition
from tests.worker import ROOT, celery_worker, flush_broker, sent_sms, worker_env
from triggers.models import TriggerInstance, TriggerStatus, TriggerStatusChange
from triggers.services import trigger_create

GUNICORN = str(Path(sys.executable).parent / "gunicorn")

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
    driver.set_page_load_timeout(120)
    return driver


def assert_fits(driver, width: int = 1400) -> None:
    """The list fits the 1,400 px window, sidebars open: neither the page nor the
    results table scrolls sideways (every column, the last one included, is seen)."""
    page = driver.execute_script("return document.documentElement.scrollWidth")
    assert page <= width, f"page is {page}px wide"
    overflow = driver.execute_script(
        "const r = document.querySelector('#changelist .results');"
        "return r ? r.scrollWidth - r.clientWidth : 0"
    )
    assert overflow <= 0, f"the list overflows its box by {overflow}px"


def full_page_screenshot(driver, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, min(max(height, 800), 6000))
    path = SCREENSHOTS / name
    assert driver.save_screenshot(str(path))
    driver.set_window_size(1400, 1000)
    return path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def readme_web_server(tmp_path: Path) -> Iterator[str]:
    """``manage.py collectstatic`` then ``gunicorn notifyflow.wsgi:application`` with
    DEBUG off (README, "Running it for real"), on the test database; yields its URL."""
    env = worker_env(tmp_path, DJANGO_DEBUG="0", NOTIFYFLOW_STATIC_ROOT=str(tmp_path / "static"))
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
        cwd=ROOT,
        env=env,
        check=True,
    )
    port = _free_port()
    log_path = tmp_path / "gunicorn.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [GUNICORN, "notifyflow.wsgi:application", "-b", f"127.0.0.1:{port}", "-w", "2"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 180  # a loaded machine boots gunicorn slowly
            while True:
                try:
                    urllib.request.urlopen(f"{url}/admin/login/", timeout=10)
                    break
                except OSError as exc:  # refused while booting, or a slow first answer
                    if proc.poll() is not None or time.monotonic() > deadline:
                        log_text = log_path.read_text()
                        raise RuntimeError(f"gunicorn did not start:\n{log_text}") from exc
                    time.sleep(0.2)
            yield url
        finally:
            proc.terminate()
            proc.wait(timeout=60)


def assert_assets_load(driver) -> None:
    """Every stylesheet and script of the current page answers 200 with content (a
    404 from a missing collectstatic or storage would leave the console unstyled), and
    the admin's stylesheet is applied."""
    urls = driver.execute_script(
        "return [...document.querySelectorAll('link[rel=stylesheet][href], script[src]')]"
        ".map(e => e.href || e.src)"
    )
    assert urls, "no stylesheet or script on the page"
    for url in urls:
        with urllib.request.urlopen(url, timeout=10) as response:
            assert response.status == 200 and response.read(1), url


def assert_styled(driver) -> None:
    assert_assets_load(driver)
    # base.css is applied: the header has the admin's colour, not a transparent default.
    background = driver.execute_script(
        "const h = document.getElementById('header');"
        "return h && getComputedStyle(h).backgroundColor"
    )
    assert background and background != "rgba(0, 0, 0, 0)", background


def log_in(driver, url: str, username: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(f"{url}/admin/login/?next=/admin/")
    assert_styled(driver)
    driver.find_element(By.NAME, "username").send_keys(username)
    driver.find_element(By.NAME, "password").send_keys(PASSWORD)
    driver.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    # Until the login POST has landed: the login page has #content too, and navigating
    # away earlier aborts the POST, leaving the next page to redirect to the login.
    WebDriverWait(driver, 60).until(lambda d: "/admin/login/" not in d.current_url)


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
    assert step_execute(instance_id=instance.pk, worker="pytest") == StepOutcome.ADVANCED
    assert step_execute(instance_id=instance.pk, worker="pytest") == StepOutcome.FAILED_PERMANENT
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.FAILED and instance.current_node_id == "text"
    # Drop the task messages those steps queued: the worker starts with an empty broker.
    flush_broker()
    return instance


def test_operator_retries_a_failed_instance_and_sees_it_complete(settings, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    flush_broker()
    operator = make_operator("olive")
    instance = instance_failed_on_its_sms_step(settings)
    short_id = ids.short_id(instance.pk)

    driver = chromium(tmp_path)
    wait = WebDriverWait(driver, 60)
    stack = ExitStack()
    try:
        url = stack.enter_context(readme_web_server(tmp_path))
        log_in(driver, url, operator.username)

        # The front page overview counts the failure.
        wait.until(ec.presence_of_element_located((By.ID, "nf-overview")))
        assert_styled(driver)
        assert driver.find_element(By.ID, "nf-count-failed").text == "1"
        assert driver.find_element(By.ID, "nf-failed-last-hour").text == "1"
        full_page_screenshot(driver, "admin-index.png")

        # Overview -> failed instances (the error and its kind in the list) -> the instance.
        driver.find_element(By.LINK_TEXT, "Failed").click()
        wait.until(ec.presence_of_element_located((By.LINK_TEXT, short_id)))
        assert_styled(driver)
        row = driver.find_element(By.CSS_SELECTOR, "#result_list tbody tr").text
        assert "invalid 'To' phone number" in row and "permanent" in row
        assert_fits(driver)
        full_page_screenshot(driver, "admin-failed-list.png")
        driver.find_element(By.LINK_TEXT, short_id).click()
        wait.until(ec.presence_of_element_located((By.ID, "nf-retry")))
        assert_styled(driver)

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

        # A permanent failure: "Retry" first asks, and says why it would fail again.
        driver.find_element(By.ID, "nf-retry").click()
        wait.until(ec.presence_of_element_located((By.ID, "nf-confirm-retry")))
        assert_styled(driver)
        assert "will most likely fail again" in driver.find_element(By.ID, "content").text
        full_page_screenshot(driver, "admin-retry-confirm.png")

        with celery_worker(tmp_path):
            # The provider has accepted the number since: retry anyway.
            driver.find_element(By.ID, "nf-confirm-retry").click()
            wait.until(
                ec.text_to_be_present_in_element(
                    (By.CSS_SELECTOR, "ul.messagelist"), "Retry scheduled"
                )
            )
            deadline = time.monotonic() + 180
            while not driver.find_elements(
                By.CSS_SELECTOR, ".field-status_display .nf-status-completed"
            ):
                assert time.monotonic() < deadline, "instance did not complete in 180s"
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
        stack.close()

    instance.refresh_from_db()
    assert instance.status == TriggerStatus.COMPLETED
    retry = TriggerStatusChange.objects.get(
        instance=instance, from_status="failed", to_status="enqueued"
    )
    assert retry.actor == operator.username
    assert sent_sms(tmp_path) == {f"{instance.pk}:text": 1}


def test_render_error_is_seen_in_the_list_and_completes_when_retried_on_the_latest_version(
    tmp_path,
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    from tests.factories import render_error_definition
    from workflows.services import workflow_save

    flush_broker()
    operator = make_operator("olive")
    WorkflowFactory(key="render-error", name="Render error", definition=render_error_definition())
    instance = trigger_create(
        workflow="render-error", idempotency_key="typo-1", payload=PAYLOAD
    ).instance
    assert step_execute(instance_id=instance.pk, worker="pytest") == StepOutcome.ADVANCED
    assert step_execute(instance_id=instance.pk, worker="pytest") == StepOutcome.FAILED_PERMANENT
    flush_broker()
    short_id = ids.short_id(instance.pk)

    driver = chromium(tmp_path)
    wait = WebDriverWait(driver, 60)
    stack = ExitStack()
    try:
        url = stack.enter_context(readme_web_server(tmp_path))
        log_in(driver, url, operator.username)
        wait.until(ec.presence_of_element_located((By.ID, "nf-overview")))
        driver.get(
            f"{url}/admin/triggers/triggerinstance/?status__exact=failed&error_kind=permanent"
        )
        assert_styled(driver)
        row = driver.find_element(By.CSS_SELECTOR, "#result_list tbody tr")
        assert short_id in row.text and "permanent" in row.text
        error_cell = row.find_element(By.CSS_SELECTOR, "td.field-last_error_short span")
        assert "nmae" in error_cell.get_attribute("title")  # the full text on hover
        assert_fits(driver)
        full_page_screenshot(driver, "admin-render-error-list.png")

        driver.find_element(By.LINK_TEXT, short_id).click()
        wait.until(ec.presence_of_element_located((By.ID, "nf-retry")))
        assert not driver.find_elements(By.ID, "nf-retry-latest")  # nothing newer yet
        failed_node = driver.find_element(
            By.CSS_SELECTOR, 'svg.nf-dag g.nf-node-failed[data-node-id="text"]'
        )
        assert "nmae" in failed_node.text  # the drawing shows the error in the node
        assert_fits(driver)

        # The workflow's author fixes the typo: version 2.
        workflow_save(key="render-error", name="Render error", definition=email_sms_definition())
        driver.refresh()
        button = wait.until(ec.presence_of_element_located((By.ID, "nf-retry-latest")))
        assert "v2" in button.text.lower()
        full_page_screenshot(driver, "admin-render-error-instance.png")
        with celery_worker(tmp_path):
            driver.find_element(By.ID, "nf-retry-latest").click()
            wait.until(
                ec.text_to_be_present_in_element(
                    (By.CSS_SELECTOR, "ul.messagelist"), "Retry scheduled on workflow version v2"
                )
            )
            deadline = time.monotonic() + 180
            while not driver.find_elements(
                By.CSS_SELECTOR, ".field-status_display .nf-status-completed"
            ):
                assert time.monotonic() < deadline, "instance did not complete in 180s"
                time.sleep(0.5)
                driver.refresh()
        assert_styled(driver)
        history = driver.find_element(By.ID, "status_changes-group").text
        assert "v2 (was v1)" in history
        full_page_screenshot(driver, "admin-render-error-completed.png")
    finally:
        driver.quit()
        stack.close()

    instance.refresh_from_db()
    assert instance.status == TriggerStatus.COMPLETED
    assert instance.workflow_version.version == 2
    assert sent_sms(tmp_path) == {f"{instance.pk}:text": 1}


def test_waiting_instance_shows_its_deadline_and_the_docs_load_locally(tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    flush_broker()
    operator = make_operator("olive")
    WorkflowFactory(key="slow-drip", definition=email_sms_definition(delay="12d"))
    instance = trigger_create(workflow="slow-drip", idempotency_key="w-1", payload=PAYLOAD).instance
    assert step_execute(instance_id=instance.pk, worker="pytest") == StepOutcome.ADVANCED
    assert step_execute(instance_id=instance.pk, worker="pytest") == StepOutcome.ADVANCED
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.ENQUEUED
    assert instance.available_at - instance.updated_at > timedelta(days=11)
    short_id = ids.short_id(instance.pk)

    driver = chromium(tmp_path)
    wait = WebDriverWait(driver, 60)
    stack = ExitStack()
    try:
        url = stack.enter_context(readme_web_server(tmp_path))
        log_in(driver, url, operator.username)
        wait.until(ec.presence_of_element_located((By.ID, "nf-overview")))
        assert driver.find_element(By.ID, "nf-waiting").text == "1"
        assert "in 11d 23h" in driver.find_element(By.ID, "nf-next-wake-up").text
        full_page_screenshot(driver, "admin-index-waiting.png")

        driver.get(f"{url}/admin/triggers/triggerinstance/?due=waiting")
        assert_styled(driver)
        row = driver.find_element(By.CSS_SELECTOR, "#result_list tbody tr").text
        assert short_id in row and "Waiting" in row
        assert "in 11d 23h" in row and "until 20" in row and "UTC" in row
        assert_fits(driver)
        full_page_screenshot(driver, "admin-waiting-list.png")

        driver.find_element(By.LINK_TEXT, short_id).click()
        node = wait.until(
            ec.presence_of_element_located(
                (By.CSS_SELECTOR, 'svg.nf-dag g.nf-node-waiting[data-node-id="text"]')
            )
        )
        assert "waiting until" in node.get_attribute("textContent") and "UTC" in node.text
        assert_fits(driver)  # the wide drawing scrolls inside its box, not the page
        due = driver.find_element(By.CSS_SELECTOR, ".field-due").text
        assert "in 11d 23h until 20" in due and "UTC" in due
        full_page_screenshot(driver, "admin-waiting-instance.png")

        # The API docs: Swagger UI and ReDoc from our own static files (no CDN).
        driver.get(f"{url}/api/docs/")
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, ".swagger-ui .opblock")))
        assert_assets_load(driver)
        scripts = driver.execute_script(
            "return [...document.querySelectorAll('script[src]')].map(e => e.src)"
        )
        assert scripts and all(src.startswith(f"{url}/static/") for src in scripts), scripts
        assert driver.find_elements(By.CSS_SELECTOR, ".swagger-ui .btn.authorize")
        full_page_screenshot(driver, "api-docs.png")
        driver.get(f"{url}/api/redoc/")
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, ".menu-content")))
        assert_assets_load(driver)
        full_page_screenshot(driver, "api-redoc.png")
    finally:
        driver.quit()
        stack.close()
