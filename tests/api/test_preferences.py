"""A recipient's preferences over HTTP: PUT replaces, PATCH merges, the shape
is checked with stable codes, every new opt-out is an audit row, and evaluate/ answers
what the one rule decides for a workflow and channel."""

from __future__ import annotations

import pytest

from recipients.models import OptOut, Recipient
from tests.api.test_recipients import client
from tests.factories import RecipientFactory, WorkflowFactory

pytestmark = pytest.mark.django_db

URL = "/api/v1/recipients/{}/preferences/"
EMPTY = {"channels": {}, "categories": {}, "workflows": {}, "quiet_hours": None}


def test_a_new_recipient_has_empty_preferences(api):
    RecipientFactory(id="u1")
    assert api.get(URL.format("u1")).json() == EMPTY


def test_put_replaces_and_patch_merges(api):
    RecipientFactory(id="u1")
    put = api.put(
        URL.format("u1"),
        {
            "channels": {"sms": False},
            "categories": {"marketing": {"channels": {"email": False}}},
            "quiet_hours": {"from": "22:00", "until": "07:30"},
        },
        format="json",
    )
    assert put.status_code == 200, put.content
    assert put.json() == {
        "channels": {"sms": False},
        "categories": {"marketing": {"channels": {"email": False}}},
        "workflows": {},
        "quiet_hours": {"from": "22:00", "until": "07:30"},
    }
    patched = api.patch(
        URL.format("u1"),
        {"channels": {"sms": None, "in_app": True}, "workflows": {"welcome": False}},
        format="json",
    )
    assert patched.status_code == 200, patched.content
    assert patched.json() == {
        "channels": {"in_app": True},
        "categories": {"marketing": {"channels": {"email": False}}},
        "workflows": {"welcome": False},
        "quiet_hours": {"from": "22:00", "until": "07:30"},
    }
    cleared = api.patch(URL.format("u1"), {"quiet_hours": None, "categories": None}, format="json")
    assert cleared.json()["quiet_hours"] is None
    assert cleared.json()["categories"] == {}
    replaced = api.put(URL.format("u1"), {}, format="json")
    assert replaced.json() == EMPTY


def test_every_new_opt_out_is_an_audit_row_naming_the_api_key(api):
    RecipientFactory(id="u1")
    body = {"channels": {"sms": False}, "categories": {"marketing": False}}
    api.put(URL.format("u1"), body, format="json")
    api.put(URL.format("u1"), body, format="json")  # nothing new
    api.patch(URL.format("u1"), {"workflows": {"w": {"channels": {"email": False}}}}, format="json")
    rows = OptOut.objects.filter(recipient_id="u1")
    assert sorted(rows.values_list("scope", flat=True)) == [
        "categories.marketing",
        "channels.sms",
        "workflows.w.channels.email",
    ]
    # The key that made them (the ``api`` fixture's key is named "tests").
    assert set(rows.values_list("source", flat=True)) == {"api:tests"}


@pytest.mark.parametrize(
    ("body", "field", "code"),
    [
        ({"channels": {"pigeon": True}}, "channels.pigeon", "unknown_channel"),
        ({"channels": {"email": "no"}}, "channels.email", "not_a_boolean"),
        ({"channels": []}, "channels", "not_an_object"),
        ({"categories": {"marketing": "off"}}, "categories.marketing", "invalid_setting"),
        (
            {"workflows": {"w": {"channels": {"fax": False}}}},
            "workflows.w.channels.fax",
            "unknown_channel",
        ),
        ({"workflows": {"w": {"email": False}}}, "workflows.w", "invalid_setting"),
        ({"quiet_hours": {"from": "25:00", "until": "07:00"}}, "quiet_hours.from", "invalid_time"),
        ({"quiet_hours": {"from": "22:00"}}, "quiet_hours.until", "required"),
        ({"quiet_hours": "22-07"}, "quiet_hours", "not_an_object"),
        ({"digest": True}, "digest", "unknown_field"),
    ],
)
def test_a_bad_shape_is_400_naming_the_field_with_a_stable_code(api, body, field, code):
    RecipientFactory(id="u1", preferences={"channels": {"email": True}})
    response = api.put(URL.format("u1"), body, format="json")
    assert response.status_code == 400, response.content
    assert (response.json()["field"], response.json()["code"]) == (field, code)
    assert Recipient.objects.get(pk="u1").preferences == {"channels": {"email": True}}


def test_preferences_of_an_unknown_recipient_are_404(api):
    assert api.get(URL.format("nobody")).status_code == 404
    assert api.put(URL.format("nobody"), {}, format="json").status_code == 404


def test_evaluate_answers_the_rule_for_the_workflows_categories(api):
    WorkflowFactory(key="promo")
    api.put(
        "/api/v1/workflows/promo/",
        {
            "key": "promo",
            "name": "Promo",
            "definition": WorkflowFactory._meta.model.objects.get(key="promo").definition,
            "categories": ["marketing"],
        },
        format="json",
    )
    RecipientFactory(
        id="u1", preferences={"categories": {"marketing": {"channels": {"email": False}}}}
    )

    def evaluate(channel: str, workflow: str = "promo"):
        return api.get(URL.format("u1") + f"evaluate/?workflow={workflow}&channel={channel}")

    assert evaluate("email").json() == {
        "send": False,
        "rule": "categories.marketing.channels.email",
    }
    assert evaluate("sms").json() == {"send": True, "rule": "default"}
    assert evaluate("email", "nope").status_code == 404
    assert evaluate("fax").status_code == 400


def test_a_critical_workflow_ignores_preferences(api):
    WorkflowFactory(key="reset")
    workflow = WorkflowFactory._meta.model.objects.get(key="reset")
    workflow.critical = True
    workflow.save()
    RecipientFactory(id="u1", preferences={"channels": {"email": False}})
    answer = api.get(URL.format("u1") + "evaluate/?workflow=reset&channel=email").json()
    assert answer == {"send": True, "rule": "critical"}


def test_a_trigger_key_writes_preferences_and_a_read_key_reads_them():
    RecipientFactory(id="u1")
    reader, writer = client("read"), client("trigger")
    assert (
        writer.patch(URL.format("u1"), {"channels": {"sms": False}}, format="json").status_code
        == 200
    )
    assert reader.get(URL.format("u1")).json()["channels"] == {"sms": False}
    assert reader.put(URL.format("u1"), {}, format="json").status_code == 403
