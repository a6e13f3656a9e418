"""Console authoring in headless Chromium, against gunicorn with DEBUG off (as
tests/console/test_browser.py runs it): a broken definition typed into the editor has
its problem named with node and field, the fixed one redraws the diagram without a
save, the preview for a chosen recipient says what each node would do for them, and a
test send opens its instance marked TEST. Screenshots go to var/screenshots/
(authoring-*.png)."""

from __future__ import annotations

import json
import os
import shutil
from contextlib import ExitStack
from pathlib import Path

from tests.admin_helpers import make_superuser
from tests.console.test_browser import (
    assert_styled,
    chromium,
    full_page_screenshot,
    log_in,
    pytestmark,  # noqa: F401  (browser marker, and the skip when Chromium is missing)
    readme_web_server,
)
from tests.factories import PushDeviceFactory, RecipientFactory, WorkflowFactory
from triggers.models import TriggerInstance
from workflows.models import WorkflowVersion

# Also copied here when set (a reviewer's folder), besides var/screenshots/.
EXTRA_SHOTS = os.environ.get("NOTIFYFLOW_SHOTS_DIR")

DEFINITION = {
    "entry_node_id": "hello",
    "nodes": [
        {
            "id": "hello",
            "type": "email",
            "config": {"subject": "Hi {{ recipient.properties.name }}", "body": "Welcome!"},
        },
        {"id": "text", "type": "sms", "config": {"body": "Hi {{ recipient.properties.name }}"}},
    ],
    "edges": [{"from": "hello", "to": "text"}],
}


def shot(driver, name: str) -> None:
    path = full_page_screenshot(driver, f"authoring-{name}.png")
    if EXTRA_SHOTS:
        Path(EXTRA_SHOTS).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(EXTRA_SHOTS) / path.name)


def type_definition(driver, definition_text: str) -> None:
    """Replace the editor's text, then type its last character as a keystroke (the
    input event the page listens to)."""
    from selenium.webdriver.common.by import By

    editor = driver.find_element(By.ID, "id_definition")
    driver.execute_script("arguments[0].value = arguments[1];", editor, definition_text[:-1])
    editor.send_keys(definition_text[-1])


def test_editor_checks_as_you_type_redraws_previews_and_test_sends(tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    admin = make_superuser("root")
    workflow = WorkflowFactory(key="welcome", definition=DEFINITION)
    person = RecipientFactory(
        id="ada",
        email="ada@example.com",
        properties={"name": "Ada"},
        preferences={"channels": {"sms": False}},
    )
    PushDeviceFactory(recipient=person)
    driver = chromium(tmp_path)
    stack = ExitStack()
    wait = WebDriverWait(driver, 30)
    try:
        url = stack.enter_context(readme_web_server(tmp_path))
        log_in(driver, url, admin.username)
        driver.get(f"{url}/admin/workflows/workflow/{workflow.pk}/change/")
        assert_styled(driver)

        broken = json.loads(json.dumps(DEFINITION))
        broken["nodes"][1]["config"]["body"] = "Hi {{ recipient.properties.name "
        type_definition(driver, json.dumps(broken, indent=2))
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#nf-problems li"))
        problems = driver.find_element(By.ID, "nf-problems").text
        assert "Node “text”, field nodes[1].config.body" in problems, problems
        shot(driver, "editor-problem")

        fixed = json.loads(json.dumps(DEFINITION))
        fixed["nodes"].insert(1, {"id": "later", "type": "delay", "config": {"duration": "1h"}})
        fixed["edges"] = [{"from": "hello", "to": "later"}, {"from": "later", "to": "text"}]
        type_definition(driver, json.dumps(fixed, indent=2))
        wait.until(lambda d: "No problems" in d.find_element(By.ID, "nf-check-status").text)
        drawing = driver.find_element(By.CSS_SELECTOR, ".field-drawing .readonly svg")
        assert "later" in drawing.text
        assert not driver.find_elements(By.CSS_SELECTOR, "#nf-problems li")
        shot(driver, "redrawn-diagram")
        assert WorkflowVersion.objects.filter(workflow=workflow).count() == 1  # not saved

        driver.get(f"{url}/admin/workflows/workflow/{workflow.pk}/preview/")
        driver.find_element(By.NAME, "payload").clear()
        driver.find_element(By.NAME, "payload").send_keys('{"plan": "pro"}')
        driver.find_element(By.NAME, "recipient_id").send_keys("ada")
        driver.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
        wait.until(lambda d: d.find_elements(By.ID, "nf-preview-nodes"))
        page = driver.find_element(By.ID, "content").text
        assert "For recipient ada" in page and "Hi Ada" in page
        assert "skipped: preference_opt_out (rule channels.sms)" in page
        shot(driver, "recipient-preview")

        driver.get(f"{url}/admin/workflows/workflow/{workflow.pk}/change/")
        driver.find_element(By.ID, "nf-test-send-link").click()
        driver.find_element(By.NAME, "recipient_id").send_keys("ada")
        driver.find_element(By.NAME, "payload").clear()
        driver.find_element(By.NAME, "payload").send_keys('{"plan": "pro"}')
        driver.find_element(By.CSS_SELECTOR, "#nf-test-send input[type=submit]").click()
        wait.until(lambda d: "/admin/triggers/triggerinstance/" in d.current_url)
        instance = TriggerInstance.objects.get(workflow=workflow)
        assert instance.is_test and instance.recipient_id == "ada"
        assert "TEST" in driver.find_element(By.ID, "content").text
        shot(driver, "test-instance")
    finally:
        stack.close()
        driver.quit()
