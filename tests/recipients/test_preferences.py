"""The one rule: the most specific explicit setting wins."""

from __future__ import annotations

import pytest

from recipients.models import OptOut
from recipients.preferences import evaluate, opt_out, unsubscribe_scope, with_opt_out

WF = "weekly-digest"


def decide(prefs, *, channel="email", categories=("marketing", "product"), critical=False):
    decision = evaluate(
        preferences=prefs,
        workflow_key=WF,
        categories=list(categories),
        channel=channel,
        critical=critical,
    )
    return decision.send, decision.rule


def test_nothing_set_sends_by_default():
    assert decide({}) == (True, "default")
    assert decide(None) == (True, "default")


def test_a_channel_opt_out_applies_when_nothing_more_specific_is_set():
    assert decide({"channels": {"email": False}}) == (False, "channels.email")
    assert decide({"channels": {"email": False}}, channel="sms") == (True, "default")


def test_a_category_beats_the_channel():
    prefs = {"channels": {"email": False}, "categories": {"marketing": True}}
    assert decide(prefs) == (True, "categories.marketing")


def test_category_by_channel_beats_the_category():
    prefs = {"categories": {"marketing": {"channels": {"email": False}}, "product": True}}
    assert decide(prefs) == (False, "categories.marketing.channels.email")
    assert decide(prefs, channel="sms") == (True, "categories.product")


def test_the_first_of_the_workflows_categories_that_is_set_decides():
    prefs = {"categories": {"product": False, "marketing": True}}
    assert decide(prefs) == (True, "categories.marketing")
    assert decide(prefs, categories=("product", "marketing")) == (False, "categories.product")
    assert decide(prefs, categories=()) == (True, "default")


def test_the_workflow_beats_every_category():
    # Novu's surprise (a global opt-out beating a per-workflow opt-in) is not ours.
    prefs = {
        "channels": {"email": False},
        "categories": {"marketing": False},
        "workflows": {WF: True},
    }
    assert decide(prefs) == (True, f"workflows.{WF}")


def test_workflow_by_channel_is_the_most_specific():
    prefs = {"workflows": {WF: {"channels": {"email": False}}}, "categories": {"marketing": True}}
    assert decide(prefs) == (False, f"workflows.{WF}.channels.email")
    assert decide(prefs, channel="sms") == (True, "categories.marketing")


def test_critical_workflows_ignore_preferences():
    assert decide({"workflows": {WF: False}}, critical=True) == (True, "critical")


def test_malformed_entries_say_nothing():
    prefs = {"workflows": {WF: "no"}, "categories": {"marketing": {"channels": {"email": 0}}}}
    assert decide(prefs) == (True, "default")


def test_unsubscribe_scope_is_the_first_category_else_the_workflow():
    assert unsubscribe_scope(workflow_key=WF, categories=["news", "x"]) == "categories.news"
    assert unsubscribe_scope(workflow_key=WF, categories=[]) == f"workflows.{WF}"


def test_with_opt_out_sets_the_scope_and_keeps_the_rest():
    prefs = {"categories": {"news": {"channels": {"sms": True}}}, "channels": {"sms": False}}
    assert with_opt_out(prefs, "categories.news") == {
        "categories": {"news": False},
        "channels": {"sms": False},
    }
    assert with_opt_out({}, "workflows.w.channels.email") == {
        "workflows": {"w": {"channels": {"email": False}}}
    }
    assert prefs["categories"]["news"] == {"channels": {"sms": True}}  # not mutated


@pytest.mark.django_db
def test_opt_out_writes_the_preference_and_one_audit_row_once():
    from recipients.models import Recipient

    Recipient.objects.create(id="u1", email="u1@example.com")
    assert opt_out(recipient_id="u1", scope="categories.news", source="api") is True
    assert opt_out(recipient_id="u1", scope="categories.news", source="api") is False
    # Already false, but by an API write: the person's own opt-out is recorded all the
    # same (it makes the setting sticky), once.
    assert opt_out(recipient_id="u1", scope="categories.news", source="one_click") is True
    assert opt_out(recipient_id="u1", scope="categories.news", source="page") is False
    assert Recipient.objects.get(pk="u1").preferences == {"categories": {"news": False}}
    assert sorted(OptOut.objects.values_list("scope", "source")) == [
        ("categories.news", "api"),
        ("categories.news", "one_click"),
    ]
    assert opt_out(recipient_id="gone", scope="categories.news", source="api") is False
