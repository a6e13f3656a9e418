"""The gate pages of the console in headless Chromium, against gunicorn with DEBUG off
(as tests/console/test_browser.py runs it): open and closed batches, a batch with its
members, throttle counters with their count in the window, and an instance waiting for
its send window. Each page must fit the 1,400 px window; screenshots go to
var/screenshots/ (gates-*.png)."""

from __future__ import annotations

from contextlib import ExitStack
from datetime import timedelta

from django.utils import timezone

from executions import engine
from gates import batches
from gates.models import Batch
from gates.throttles import epoch_ms
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
    RecipientFactory,
    ThrottleCounterFactory,
    WorkflowFactory,
    batch_definition,
)
from triggers.models import ParkedOn, TriggerInstance
from triggers.services import RecipientEntry, trigger_create_for_recipients


def gates() -> tuple[Batch, TriggerInstance]:
    """An open digest of five comments, a flushed one, two throttle counters, and an
    OTP parked until its send window opens."""
    RecipientFactory(id="user_1842", email="ada@example.com", timezone="Europe/London")
    comments = WorkflowFactory(
        key="comment-digest", definition=batch_definition(window="1h", key="{{ payload.thread }}")
    )
    for thread, count in (("thread-7", 5), ("thread-9", 2)):
        for n in range(count):
            made = trigger_create_for_recipients(
                workflow=comments,
                idempotency_key=f"{thread}-c{n}",
                payload={"thread": thread, "text": f"comment {n}", "email": "ada@example.com"},
                recipients=[RecipientEntry(id="user_1842")],
            )
            engine.step_execute(instance_id=made.instances[0].id)
    flushed = Batch.objects.get(key="thread-9")
    batches.flush(batch_id=flushed.pk, actor="admin:root")
    now = timezone.now()
    ThrottleCounterFactory(
        subject="promo-blast:cap",
        key="spring-sale",
        hits=[epoch_ms(now - timedelta(minutes=m)) for m in (50, 20, 5)],
        limit=3,
    )
    ThrottleCounterFactory(
        scope="recipient",
        subject="user_1842",
        key="",
        hits=[epoch_ms(now - timedelta(hours=3))],
        limit=2,
        window_ms=86_400_000,
    )
    later = now + timedelta(hours=9)
    otp = WorkflowFactory(key="login-code")
    parked = TriggerInstance.objects.create(
        workflow=otp,
        workflow_version=otp.current_version,
        idempotency_key="login-4411",
        payload={"email": "ada@example.com", "name": "Ada"},
        current_node_id="hello",
        available_at=later,
        wait_deadline=later,
        parked_on=ParkedOn.SEND_WINDOW,
    )
    return Batch.objects.get(key="thread-7"), parked


def test_gate_pages_render_fit_and_are_screenshotted(tmp_path):
    from selenium.webdriver.common.by import By

    admin = make_superuser("root")
    open_batch, parked = gates()
    driver = chromium(tmp_path)
    stack = ExitStack()
    try:
        url = stack.enter_context(readme_web_server(tmp_path))
        log_in(driver, url, admin.username)

        driver.get(f"{url}/admin/gates/batch/")
        assert_styled(driver)
        table = driver.find_element(By.ID, "result_list").text
        assert "thread-7" in table and "thread-9" in table
        assert_fits(driver)
        full_page_screenshot(driver, "gates-batch-list.png")

        driver.get(f"{url}/admin/gates/batch/{open_batch.pk}/change/")
        assert_styled(driver)
        page = driver.find_element(By.ID, "content").text
        assert "(open, 5 item(s))" in page and "item 5 of batch" in page
        assert_fits(driver)
        full_page_screenshot(driver, "gates-batch-detail.png")

        driver.get(f"{url}/admin/gates/throttlecounter/")
        assert_styled(driver)
        table = driver.find_element(By.ID, "result_list").text
        assert "spring-sale" in table and "user_1842" in table
        assert_fits(driver)
        full_page_screenshot(driver, "gates-throttles.png")

        driver.get(f"{url}/admin/triggers/triggerinstance/{parked.pk}/change/")
        assert_styled(driver)
        page = driver.find_element(By.ID, "content").text
        assert "send window" in page
        assert_fits(driver)
        full_page_screenshot(driver, "gates-instance-send-window.png")
    finally:
        stack.close()
        driver.quit()
