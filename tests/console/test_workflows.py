"""Operator console: the workflow editor, its validation errors, versions and graph."""

from __future__ import annotations

import json
import re

import pytest
from django.http import HttpRequest
from django.test import Client
from django.urls import reverse

from tests.admin_helpers import PASSWORD, make_operator, make_superuser
from tests.factories import WorkflowFactory, email_sms_definition
from workflows.models import Workflow, WorkflowVersion

pytestmark = pytest.mark.django_db

ADD = "admin:workflows_workflow_add"
CHANGELIST = "admin:workflows_workflow_changelist"


def change_url(workflow: Workflow) -> str:
    return reverse("admin:workflows_workflow_change", args=[workflow.pk])


def form_data(
    key: str, definition, *, name: str = "Welcome", is_active: bool = True, priority="normal"
) -> dict:
    data = {
        "key": key,
        "name": name,
        "priority": priority,
        "definition": definition if isinstance(definition, str) else json.dumps(definition),
        # The read-only version-history inline still posts its management form.
        "versions-TOTAL_FORMS": "0",
        "versions-INITIAL_FORMS": "0",
        "versions-MIN_NUM_FORMS": "0",
        "versions-MAX_NUM_FORMS": "0",
    }
    if is_active:
        data["is_active"] = "on"
    return data


@pytest.fixture
def superuser():
    return make_superuser()


@pytest.fixture
def admin_client_(superuser) -> Client:
    client = Client()
    client.login(request=HttpRequest(), username=superuser.username, password=PASSWORD)
    return client


@pytest.fixture
def operator_client() -> Client:
    client = Client()
    client.login(request=HttpRequest(), username=make_operator().username, password=PASSWORD)
    return client


def test_add_saves_through_the_service_with_a_first_version(superuser, admin_client_):
    response = admin_client_.post(reverse(ADD), form_data("welcome", email_sms_definition()))
    assert response.status_code == 302, response.content.decode()[:3000]
    workflow = Workflow.objects.get(key="welcome")
    assert workflow.current_version.version == 1
    assert workflow.current_version.created_by == superuser.username
    assert workflow.definition == email_sms_definition()


def test_invalid_definition_names_node_and_field_and_saves_nothing(admin_client_):
    definition = email_sms_definition()
    del definition["nodes"][1]["config"]["body"]
    definition["edges"].append({"from": "text", "to": "nowhere"})
    response = admin_client_.post(reverse(ADD), form_data("broken", definition))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors["definition"]
    assert "Node “text”, field nodes[1].config.body: is required" in errors
    assert "Node “nowhere”, field edges[1].to: no node has id 'nowhere'" in errors
    body = response.content.decode()
    assert "Node “text”, field nodes[1].config.body: is required" in body
    # The textarea keeps what the user typed.
    assert "nowhere" in body
    assert not Workflow.objects.filter(key="broken").exists()
    assert WorkflowVersion.objects.count() == 0


def test_definition_that_is_not_json_is_a_form_error(admin_client_):
    response = admin_client_.post(reverse(ADD), form_data("broken", "{not json"))
    assert response.status_code == 200
    assert "Enter a valid JSON." in response.context["adminform"].form.errors["definition"]
    assert not Workflow.objects.exists()


def test_edit_adds_a_version_only_when_the_definition_changes(superuser, admin_client_):
    workflow = WorkflowFactory(key="welcome")
    same = admin_client_.post(
        change_url(workflow), form_data("welcome", email_sms_definition(), name="Renamed")
    )
    assert same.status_code == 302
    workflow.refresh_from_db()
    assert workflow.name == "Renamed" and workflow.current_version.version == 1

    changed = admin_client_.post(
        change_url(workflow), form_data("welcome", email_sms_definition(delay="15m"))
    )
    assert changed.status_code == 302
    workflow.refresh_from_db()
    assert workflow.current_version.version == 2
    assert workflow.current_version.created_by == superuser.username
    assert list(workflow.versions.values_list("version", flat=True)) == [2, 1]


def test_invalid_edit_leaves_the_current_version_untouched(admin_client_):
    workflow = WorkflowFactory(key="welcome")
    definition = email_sms_definition()
    definition["nodes"][0]["config"]["subject"] = "{% if %}"
    response = admin_client_.post(change_url(workflow), form_data("welcome", definition))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors["definition"]
    assert any(
        e.startswith("Node “hello”, field nodes[0].config.subject: invalid Liquid") for e in errors
    )
    workflow.refresh_from_db()
    assert workflow.current_version.version == 1 and workflow.versions.count() == 1


def test_change_page_shows_version_history_and_graph_with_conditions(admin_client_):
    definition = {
        "entry_node_id": "start",
        "nodes": [
            {"id": "start", "type": "delay", "config": {"duration": "1h"}},
            {
                "id": "pro",
                "type": "email",
                "config": {"to": "{{ payload.email }}", "subject": "s", "body": "b"},
            },
            {"id": "free", "type": "sms", "config": {"to": "{{ payload.phone }}", "body": "b"}},
        ],
        "edges": [
            {"from": "start", "to": "pro", "condition": 'payload.plan == "pro"'},
            {"from": "start", "to": "free"},
        ],
    }
    workflow = WorkflowFactory(definition=email_sms_definition())
    workflow = WorkflowFactory._create(
        Workflow, key=workflow.key, name="W", is_active=True, definition=definition
    )
    body = admin_client_.get(change_url(workflow)).content.decode()
    assert "version history" in body.lower()
    inline_versions = re.findall(r'<td class="field-version">\s*<p>(\d+)</p>', body)
    assert inline_versions == ["2", "1"]
    start = body.index('class="nf-dag"')
    svg = body[start : body.index("</svg>", start)]
    for node_id in ("start", "pro", "free"):
        assert f'data-node-id="{node_id}"' in svg
    assert "1. if payload.plan == &quot;pro&quot;" in svg
    assert "2. else" in svg
    assert "DELAY" in svg and "EMAIL" in svg and "SMS" in svg


def test_operator_sees_the_definition_but_cannot_add_or_change(operator_client):
    workflow = WorkflowFactory(key="welcome")
    page = operator_client.get(change_url(workflow))
    assert page.status_code == 200
    body = page.content.decode()
    assert 'name="definition"' not in body and "&quot;entry_node_id&quot;" in body
    assert 'name="_save"' not in body

    definition = email_sms_definition(delay="1m")
    response = operator_client.post(change_url(workflow), form_data("welcome", definition))
    assert response.status_code == 403
    assert operator_client.get(reverse(ADD)).status_code == 403
    assert operator_client.post(reverse(ADD), form_data("new", definition)).status_code == 403
    workflow.refresh_from_db()
    assert workflow.versions.count() == 1
    assert not Workflow.objects.filter(key="new").exists()
    listing = operator_client.get(reverse(CHANGELIST)).content.decode()
    assert "deactivate" not in listing


def test_activate_and_deactivate_actions(admin_client_):
    active, inactive = WorkflowFactory(), WorkflowFactory(is_active=False)
    admin_client_.post(
        reverse(CHANGELIST), {"action": "deactivate", "_selected_action": [active.pk, inactive.pk]}
    )
    active.refresh_from_db()
    assert not active.is_active
    response = admin_client_.post(
        reverse(CHANGELIST),
        {"action": "activate", "_selected_action": [active.pk, inactive.pk]},
        follow=True,
    )
    assert "2 workflow(s) set active." in [str(m) for m in response.context["messages"]]
    assert Workflow.objects.filter(is_active=True).count() == 2


def test_changelist_renders_without_loading_definitions(admin_client_):
    for _ in range(3):
        WorkflowFactory()
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        response = admin_client_.get(reverse(CHANGELIST))
    assert response.status_code == 200
    assert "v1" in response.content.decode()
    assert not [
        q
        for q in queries.captured_queries
        if '"workflows_workflowversion"."definition"' in q["sql"]
    ]


def test_change_page_shows_the_mermaid_text_next_to_the_drawing(admin_client_):
    workflow = WorkflowFactory(definition=email_sms_definition(delay="1h"))
    body = admin_client_.get(change_url(workflow)).content.decode()
    start = body.index('class="nf-mermaid"')
    block = body[start : body.index("</pre>", start)]
    assert body.index('class="nf-dag"') < start  # after the drawing, in the same fieldset
    assert "flowchart LR" in block
    assert "n0[&quot;hello&lt;br/&gt;&lt;small&gt;email&lt;/small&gt;&quot;]" in block
    assert "n1 --&gt; n2" in block


def test_critical_and_categories_are_editable_from_a_friendly_input(admin_client_):
    workflow = WorkflowFactory(key="news")
    data = form_data("news", email_sms_definition())
    data.update(critical="on", categories=" marketing, product-news ,marketing,")
    response = admin_client_.post(change_url(workflow), data)
    assert response.status_code == 302, response.content.decode()[:3000]
    workflow.refresh_from_db()
    assert workflow.critical is True
    # Order kept (the first is the unsubscribe scope), duplicates and blanks dropped.
    assert workflow.categories == ["marketing", "product-news"]
    assert workflow.current_version.version == 1  # settings are no new version

    page = admin_client_.get(change_url(workflow)).content.decode()
    assert 'value="marketing, product-news"' in page
    listing = admin_client_.get(reverse(CHANGELIST)).content.decode()
    assert "marketing, product-news" in listing

    cleared = form_data("news", email_sms_definition())
    assert admin_client_.post(change_url(workflow), cleared).status_code == 302
    workflow.refresh_from_db()
    assert (workflow.critical, workflow.categories) == (False, [])


def test_categories_must_be_slugs(admin_client_):
    workflow = WorkflowFactory(key="news")
    data = form_data("news", email_sms_definition())
    data["categories"] = "marketing, Product News, ok_1"
    response = admin_client_.post(change_url(workflow), data)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors["categories"]
    assert errors == ["Not a category slug (lowercase letters, digits, - or _): 'Product News'"]
    workflow.refresh_from_db()
    assert workflow.categories == []


def test_add_with_categories(admin_client_):
    data = form_data("digest", email_sms_definition())
    data["categories"] = "digest"
    assert admin_client_.post(reverse(ADD), data).status_code == 302
    workflow = Workflow.objects.get(key="digest")
    assert (workflow.categories, workflow.critical) == (["digest"], False)


def test_priority_is_chosen_in_the_form_shown_and_filtered_in_the_list(admin_client_):
    workflow = WorkflowFactory(key="resets")
    WorkflowFactory(key="news", priority="bulk")
    data = form_data("resets", email_sms_definition(), priority="critical")
    response = admin_client_.post(change_url(workflow), data)
    assert response.status_code == 302, response.content.decode()[:3000]
    workflow.refresh_from_db()
    assert workflow.priority == "critical"
    assert workflow.current_version.version == 1  # a setting is no new version
    page = admin_client_.get(change_url(workflow)).content.decode()
    assert '<option value="critical" selected>' in page
    listing = admin_client_.get(reverse(CHANGELIST), {"priority__exact": "bulk"})
    assert [w.key for w in listing.context["cl"].result_list] == ["news"]


def test_an_unknown_priority_is_a_form_error(admin_client_):
    workflow = WorkflowFactory(key="news")
    response = admin_client_.post(
        change_url(workflow), form_data("news", email_sms_definition(), priority="urgent")
    )
    assert response.status_code == 200
    assert "priority" in response.context["adminform"].form.errors
    workflow.refresh_from_db()
    assert workflow.priority == "normal"
