"""The in-app feed in headless Chromium, against gunicorn with DEBUG off (as
tests/console/test_browser.py runs it):

- the console shows a recipient's feed (counts and latest items on its page, the
  feed items' list filtered by the recipient): var/screenshots/feed-admin*.png;
- docs/feed-example.html, served from another origin (its own HTTP server on another
  port, so every call is cross-origin: CORS and the preflight are exercised), with a
  real recipient token: it shows the items and the unread count, and a click marks an
  item read (the badge goes down): var/screenshots/feed-example.png.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlencode

from django.utils import timezone

from executions import engine
from feed.models import FeedItem
from feed.services import feed_counts, feed_item_mark
from feed.tokens import feed_token_create
from tests.admin_helpers import make_superuser
from tests.console.test_browser import (
    chromium,
    full_page_screenshot,
    log_in,
    pytestmark,  # noqa: F401  (browser marker, and the skip when Chromium is missing)
    readme_web_server,
)
from tests.factories import FeedWorkflowFactory, RecipientFactory, in_app_definition
from tests.worker import ROOT
from triggers.services import RecipientEntry, trigger_create_for_recipients

COMMENTS = [
    ("Grace", "Nice post!"),
    ("Alan", "What about the edge case?"),
    ("Barbara", "Merged, thanks"),
    ("Edsger", "Considered harmful?"),
]


def a_feed() -> str:
    """Ada's feed, written by the in_app node: four comments, one read, one archived."""
    RecipientFactory(id="user_1842", email="ada@example.com")
    workflow = FeedWorkflowFactory(
        key="new-comment",
        definition=in_app_definition(url="", title="{{ payload.name }} commented"),
    )
    for n, (name, text) in enumerate(COMMENTS):
        made = trigger_create_for_recipients(
            workflow=workflow,
            idempotency_key=f"comment-{n}",
            payload={"name": name, "comment_id": n, "text": text},
            recipients=[RecipientEntry(id="user_1842")],
        )
        engine.step_execute(instance_id=made.instances[0].id)
    items = list(FeedItem.objects.order_by("created_at"))
    now = timezone.now()
    feed_item_mark(recipient_id="user_1842", item_id=items[0].pk, action="read", now=now)
    feed_item_mark(recipient_id="user_1842", item_id=items[1].pk, action="archive", now=now)
    return "user_1842"


@contextmanager
def docs_server() -> Iterator[str]:
    """docs/ over HTTP on a port of its own: another origin than the API's."""
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(ROOT / "docs"))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _wait_for(driver, script: str, expected, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while True:
        value = driver.execute_script(script)
        if value == expected or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def test_the_admin_shows_a_recipient_s_feed(tmp_path, settings):
    from selenium.webdriver.common.by import By

    settings.NOTIFYFLOW_PUBLIC_URL = "https://notify.example.com"
    admin = make_superuser("root")
    recipient = a_feed()
    driver = chromium(tmp_path)
    stack = ExitStack()
    try:
        url = stack.enter_context(readme_web_server(tmp_path))
        log_in(driver, url, admin.username)
        driver.get(f"{url}/admin/recipients/recipient/{recipient}/change/")
        page = driver.find_element(By.ID, "content").text
        assert "In-app feed" in page
        assert "2 unread, 3 unseen" in page
        assert "Edsger commented" in page and "Grace commented" in page
        full_page_screenshot(driver, "feed-admin.png")

        driver.find_element(By.LINK_TEXT, "All feed items of this recipient →").click()
        table = driver.find_element(By.ID, "result_list").text
        assert "Barbara commented" in table and "Grace commented" in table
        assert "Alan commented" not in table or "archived" in table
        full_page_screenshot(driver, "feed-admin-list.png")
    finally:
        driver.quit()
        stack.close()


def test_the_example_page_shows_the_feed_and_marks_an_item_read(tmp_path, settings):
    from selenium.webdriver.common.by import By

    settings.NOTIFYFLOW_PUBLIC_URL = "https://notify.example.com"
    recipient = a_feed()
    token = feed_token_create(recipient_id=recipient, now=timezone.now()).token
    driver = chromium(tmp_path)
    stack = ExitStack()
    try:
        api = stack.enter_context(readme_web_server(tmp_path))
        docs = stack.enter_context(docs_server())
        driver.get(f"{docs}/feed-example.html?" + urlencode({"api": api, "token": token}))
        badge = "return document.getElementById('badge').textContent"
        assert _wait_for(driver, badge, "2") == "2"
        # The badge and the list come from two requests: wait for the list too.
        listed = "return document.querySelectorAll('#feed li').length"
        assert _wait_for(driver, listed, 3) == 3
        assert driver.find_element(By.ID, "error").text == ""
        items = driver.find_elements(By.CSS_SELECTOR, "#feed li")
        titles = [li.text.splitlines()[0] for li in items]
        # Newest first; the archived one (Alan's) is not listed.
        assert titles == ["Edsger commented", "Barbara commented", "Grace commented"]
        unread = [li.text.splitlines()[0] for li in items if "unread" in li.get_attribute("class")]
        assert unread == ["Edsger commented", "Barbara commented"]
        full_page_screenshot(driver, "feed-example.png")

        items[0].click()  # Edsger's: marked read, the badge polls down to 1
        assert _wait_for(driver, badge, "1") == "1"
        assert feed_counts(recipient_id=recipient).unread_count == 1
        assert FeedItem.objects.get(title="Edsger commented").read_at is not None
    finally:
        driver.quit()
        stack.close()
