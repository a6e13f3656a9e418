"""Ids with their hidden characters shown (console/visible.py): ids that differ only by
whitespace or control characters look different wherever the console shows them."""

from __future__ import annotations

import html
import re
from datetime import timedelta

import pytest
from django.http import HttpRequest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from console.visible import visible_id, visible_text
from gates import batches
from gates.models import Batch
from notifyflow.ids import short_id
from tests.admin_helpers import PASSWORD, make_superuser
from tests.factories import (
    BatchInstanceFactory,
    BatchWorkflowFactory,
    RecipientFactory,
    ThrottleCounterFactory,
    TriggerInstanceFactory,
)

# Ids that the stock admin shows alike (HTML folds whitespace; a newline is a space).
LOOKALIKES = ["a b", "a\nb", "a b ", "a  b", " a b", "a\tb", "a\u00a0b", "a\u202eb"]
SHOWN = ["a b", "a\\nb", "a b·", "a··b", "·a b", "a\\tb", "a\\xa0b", "a\\u202eb"]


def test_hidden_characters_are_escaped_and_unseen_spaces_marked():
    assert [visible_text(value) for value in LOOKALIKES] == SHOWN
    assert (
        visible_text("a\x00b\x7f\u200b\u2028\U000e0001") == "a\\x00b\\x7f\\u200b\\u2028\\U000e0001"
    )
    assert visible_text("plain-id_42 émoji 🙂") == "plain-id_42 émoji 🙂"
    assert str(visible_id("a\nb")) == ('a<span class="nf-esc" title="U+000A line feed">\\n</span>b')
    assert str(visible_id("a\u202eb <x>  ")) == (
        'a<span class="nf-esc" title="U+202E right-to-left override">\\u202e</span>b '
        '&lt;x&gt;<span class="nf-sp" title="2 spaces">··</span>'
    )
    assert str(visible_id("")) == "-" and str(visible_id(None, empty="(none)")) == "(none)"


def test_a_long_id_is_cut_with_the_whole_of_it_in_its_title():
    shown = str(visible_id("key\n" + "x" * 40, limit=10))
    assert shown == (
        '<span class="nf-id nf-trunc" title="key\\n' + "x" * 40 + '">key<span class="nf-esc" '
        'title="U+000A line feed">\\n</span>xxxxx…</span>'
    )


def client() -> Client:
    user = make_superuser()
    logged_in = Client()
    assert logged_in.login(request=HttpRequest(), username=user.username, password=PASSWORD)
    return logged_in


def text_of(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


def column(page: str, field: str) -> list[str]:
    """The text of each cell of a list's column, in order."""
    cells = re.findall(rf'<t[dh] class="field-{field}"[^>]*>(.*?)</t[dh]>', page, re.S)
    return [text_of(cell) for cell in cells]


def subtitle(page: str) -> str:
    found = re.search(r'<div id="content"[^>]*>.*?<h2>(.*?)</h2>', page, re.S)
    assert found is not None
    return text_of(found.group(1))


def readonly(page: str, field: str) -> str:
    found = re.search(rf'field-{field}">.*?<div class="readonly">(.*?)</div>', page, re.S)
    assert found is not None, field
    return text_of(found.group(1))


@pytest.mark.django_db
def test_recipient_ids_differ_in_the_list_and_on_their_page():
    for value in LOOKALIKES:
        RecipientFactory(id=value)
    browser = client()
    listed = browser.get(reverse("admin:recipients_recipient_changelist")).content.decode()
    assert sorted(column(listed, "id_display")) == sorted(SHOWN)
    page = browser.get(reverse("admin:recipients_recipient_change", args=["a b "])).content.decode()
    assert readonly(page, "id_display") == "a b·"
    assert subtitle(page) == "a b·"
    crumbs = re.search(r'<div class="breadcrumbs">(.*?)</div>', page, re.S)
    assert crumbs is not None and text_of(crumbs.group(1)).split("› ")[-1].strip() == "a b·"


@pytest.mark.django_db
def test_idempotency_keys_and_recipients_of_instances_differ():
    people = {value: RecipientFactory(id=value) for value in ("u 1", "u\n1")}
    made = [
        TriggerInstanceFactory(idempotency_key=key, recipient=people[person])
        for key, person in (("k 1", "u 1"), ("k\n1", "u\n1"), ("k 1 ", "u 1"))
    ]
    browser = client()
    listed = browser.get(reverse("admin:triggers_triggerinstance_changelist")).content.decode()
    assert sorted(column(listed, "idempotency_key_short")) == ["k 1", "k 1·", "k\\n1"]
    url = reverse("admin:triggers_triggerinstance_change", args=[made[1].pk])
    page = browser.get(url).content.decode()
    assert readonly(page, "idempotency_key_display") == "k\\n1"
    assert readonly(page, "recipient_display") == "u\\n1"
    # Its name is its key: one trailing space shows as one, apart from the short id.
    url = reverse("admin:triggers_triggerinstance_change", args=[made[2].pk])
    assert subtitle(browser.get(url).content.decode()) == f"k 1· ({short_id(made[2].pk)})"


@pytest.mark.django_db
def test_list_keys_batch_keys_and_throttle_keys_differ():
    from recipients.models import RecipientList

    for key in ("news", "news "):
        RecipientList.objects.create(key=key, name="News")
    browser = client()
    lists = browser.get(reverse("admin:recipients_recipientlist_changelist")).content.decode()
    assert sorted(column(lists, "key_display")) == ["news", "news·"]

    workflow = BatchWorkflowFactory()
    for key in ("t 7", "t\t7"):
        instance = BatchInstanceFactory(workflow=workflow)
        batches.arrive(
            instance_id=instance.pk,
            workflow_id=workflow.pk,
            recipient_id=instance.recipient_id,
            node_id="collect",
            key=key,
            window=timedelta(minutes=1),
            max_items=None,
            now=timezone.now(),
        )
    listed = browser.get(reverse("admin:gates_batch_changelist")).content.decode()
    assert sorted(column(listed, "key_display")) == ["t 7", "t\\t7"]
    tabbed = Batch.objects.get(key="t\t7")
    page = browser.get(reverse("admin:gates_batch_change", args=[tabbed.pk])).content.decode()
    assert readonly(page, "key_display") == "t\\t7"

    ThrottleCounterFactory(scope="recipient", subject="u\u202e1", key="sale ")
    throttles = browser.get(reverse("admin:gates_throttlecounter_changelist")).content.decode()
    assert column(throttles, "subject_display") == ["u\\u202e1"]
    assert column(throttles, "key_display") == ["sale·"]
