"""The people pages of the console in headless Chromium, against gunicorn with DEBUG
off (as tests/console/test_browser.py runs it): a recipient found by email, their page
(preferences, lists, opt-out history, instances, deliveries), lists with member counts,
fan-outs with progress bars, a workflow's critical/categories settings and an instance
that names its recipient and shows a skipped step. Each page must fit the 1,400 px
window; screenshots go to var/screenshots/ (people-*.png)."""

from __future__ import annotations

from contextlib import ExitStack
from datetime import timedelta

from django.utils import timezone

from executions.models import Delivery, DeliveryStatus, SkipReason, StepExecutionLog
from notifyflow import ids
from recipients.models import ListMembership, OptOut, OptOutSource, Recipient
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
    RecipientListFactory,
    TriggerInstanceFactory,
    WorkflowFactory,
)
from triggers.models import TriggerInstance, TriggerStatus
from triggers.models.fanouts import FanOutStatus


def people() -> tuple[Recipient, TriggerInstance]:
    """Recipients, lists, opt-outs, fan-outs and an instance of Ada's whose email step
    was skipped by her preferences and whose SMS went out."""
    news = WorkflowFactory(key="product-news", name="Product news")
    news.categories = ["marketing", "product"]
    news.save(update_fields=["categories"])
    reset = WorkflowFactory(key="password-reset", name="Password reset")
    reset.critical = True
    reset.save(update_fields=["critical"])
    ada = RecipientFactory(
        id="user_1842",
        email="Ada.Lovelace@example.com",
        phone="+447700900123",
        timezone="Europe/London",
        locale="en-GB",
        properties={"first_name": "Ada", "plan": "pro"},
        preferences={
            "channels": {"sms": True},
            "categories": {"marketing": {"channels": {"email": False}}},
            "workflows": {"password-reset": True},
            "quiet_hours": {"from": "22:00", "until": "07:00"},
        },
    )
    others = [
        RecipientFactory(id=f"user_{1900 + n}", phone=f"+1500555{n:04d}" if n % 3 else None)
        for n in range(14)
    ]
    weekly = RecipientListFactory(key="weekly-digest", name="Weekly digest")
    beta = RecipientListFactory(key="beta-testers", name="Beta testers")
    RecipientListFactory(key="launch-2027", name="Launch 2027 waitlist")
    ListMembership.objects.bulk_create(
        [ListMembership(list=weekly, recipient=r) for r in [ada, *others]]
        + [ListMembership(list=beta, recipient=r) for r in [ada, *others[:3]]]
    )
    OptOut.objects.create(
        recipient=ada,
        scope="categories.marketing.channels.email",
        source=OptOutSource.ONE_CLICK,
        details={"workflow": "product-news", "instance": "0193a1f2"},
    )
    OptOut.objects.create(
        recipient=ada, scope="workflows.weekly-tips", source=OptOutSource.ESP_UNSUBSCRIBED
    )

    instance = TriggerInstanceFactory(
        workflow=news,
        recipient=ada,
        idempotency_key="launch-2026-11",
        status=TriggerStatus.COMPLETED,
        current_node_id="",
        finished_at=timezone.now(),
    )
    now = timezone.now()
    common = {"trigger": instance, "workflow": news, "workflow_version": 1, "attempt": 1}
    StepExecutionLog.objects.create(
        **common,
        node_id="hello",
        node_type="email",
        started_at=now - timedelta(seconds=2),
        finished_at=now - timedelta(seconds=2),
        input_context={"recipient": {"$ref": "recipient", "id": ada.pk}},
        output={
            "skipped": True,
            "reason": "preference_opt_out",
            "rule": "categories.marketing.channels.email",
        },
        success=True,
        skip_reason=SkipReason.PREFERENCE_OPT_OUT,
    )
    StepExecutionLog.objects.create(
        **common,
        node_id="text",
        node_type="sms",
        started_at=now - timedelta(seconds=1),
        finished_at=now,
        input_context={"recipient": {"$ref": "recipient", "id": ada.pk}},
        output={"sid": "SM123", "to": "+447700900123"},
        success=True,
    )
    Delivery.objects.create(
        instance=instance,
        node_id="text",
        channel="sms",
        recipient="+447700900123",
        status=DeliveryStatus.SENT,
        provider_message_id="SM123",
        attempts=1,
    )
    for n in range(3):
        TriggerInstanceFactory(workflow=news, recipient=ada, idempotency_key=f"tips-{n}")

    FanOutFactory(
        workflow=news,
        idempotency_key="launch-2026-11",
        lists=["weekly-digest", "beta-testers"],
        recipient_ids=[f"u{n}" for n in range(100_000)],
        position=41_000,
        expected=100_000,
        created=40_870,
        duplicates=130,
    )
    FanOutFactory(
        workflow=news,
        idempotency_key="digest-w47",
        lists=["weekly-digest"],
        recipient_ids=[],
        status=FanOutStatus.DONE,
        expected=15,
        created=15,
        finished_at=now,
    )
    FanOutFactory(workflow=news, idempotency_key="digest-w48", lists=["weekly-digest"])
    FanOutFactory(
        workflow=news,
        idempotency_key="beta-invite",
        lists=["beta-testers"],
        recipient_ids=[],
        status=FanOutStatus.CANCELLED,
        expected=4,
        created=2,
        finished_at=now,
    )
    return ada, instance


def test_people_pages_render_fit_and_are_screenshotted(tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    admin = make_superuser("root")
    ada, instance = people()
    driver = chromium(tmp_path)
    wait = WebDriverWait(driver, 60)
    stack = ExitStack()
    try:
        url = stack.enter_context(readme_web_server(tmp_path))
        log_in(driver, url, admin.username)
        wait.until(ec.presence_of_element_located((By.ID, "content")))

        # Recipients, searched by email in another case.
        driver.get(f"{url}/admin/recipients/recipient/?q=ada.lovelace%40EXAMPLE.com")
        assert_styled(driver)
        rows = driver.find_elements(By.CSS_SELECTOR, "#result_list tbody tr")
        assert len(rows) == 1 and "user_1842" in rows[0].text
        assert_fits(driver)
        driver.get(f"{url}/admin/recipients/recipient/")
        assert_fits(driver)
        full_page_screenshot(driver, "people-recipient-list.png")

        driver.get(f"{url}/admin/recipients/recipient/user_1842/change/")
        assert_styled(driver)
        page = driver.find_element(By.ID, "content").text
        assert "categories.marketing.channels.email" in page
        assert "weekly-digest" in page and "launch-2026-11" in page
        assert "+447700900123" in page
        full_page_screenshot(driver, "people-recipient-detail.png")

        driver.get(f"{url}/admin/recipients/recipientlist/")
        assert_styled(driver)
        table = driver.find_element(By.ID, "result_list").text
        assert "weekly-digest" in table and "15" in table
        assert_fits(driver)
        full_page_screenshot(driver, "people-list-list.png")

        driver.get(f"{url}/admin/triggers/fanout/")
        assert_styled(driver)
        table = driver.find_element(By.ID, "result_list").text
        assert "40,870 created + 130 duplicate(s) of 100,000 expected" in table
        assert_fits(driver)
        full_page_screenshot(driver, "people-fanout-list.png")

        driver.get(f"{url}/admin/workflows/workflow/")
        driver.find_element(By.LINK_TEXT, "product-news").click()
        wait.until(ec.presence_of_element_located((By.ID, "id_categories")))
        assert_styled(driver)
        field = driver.find_element(By.ID, "id_categories")
        assert field.get_attribute("value") == "marketing, product"
        full_page_screenshot(driver, "people-workflow-change.png")

        driver.get(f"{url}/admin/triggers/triggerinstance/{instance.pk}/change/")
        assert_styled(driver)
        assert "user_1842" in driver.find_element(By.CSS_SELECTOR, ".field-recipient_display").text
        logs = driver.find_element(By.ID, "step_logs-group").text
        assert "preference_opt_out" in logs and "skipped" in logs
        full_page_screenshot(driver, "people-instance-detail.png")
        assert ids.short_id(instance.pk)
    finally:
        stack.close()
        driver.quit()
