"""Admin for workflow triggers (validated settings, preview-key page) and event records."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from tests.factories import WorkflowTriggerFactory
from triggers.events import event_receive
from triggers.models.events import EventRecord, WorkflowTrigger

pytestmark = pytest.mark.django_db


def test_changelist_shows_event_workflow_active_and_strategy(admin_client):
    WorkflowTriggerFactory(
        event_name="SUB_ORG_MEMBER_ENROLLMENT",
        idempotency_setting={"strategy": "TIME_WINDOW", "ttlMinutes": 5},
    )
    WorkflowTriggerFactory(event_name="BROKEN", idempotency_setting={"strategy": "NOPE"})
    response = admin_client.get(reverse("admin:triggers_workflowtrigger_changelist"))
    assert response.status_code == 200
    html = response.content.decode()
    assert "SUB_ORG_MEMBER_ENROLLMENT" in html and "TIME_WINDOW" in html
    assert "invalid (runs as UUID)" in html


def add(admin_client, workflow, setting: str):
    return admin_client.post(
        reverse("admin:triggers_workflowtrigger_add"),
        {
            "event_name": "E",
            "workflow": workflow.pk,
            "is_active": "on",
            "idempotency_setting": setting,
        },
    )


def test_add_form_rejects_an_invalid_setting_naming_the_field(admin_client, workflow):
    response = add(
        admin_client, workflow, '{"strategy": "CONTEXT_TIME_WINDOW", "contextFields": ["userId"]}'
    )
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert errors["idempotency_setting"] == [
        "idempotency_setting.ttlMinutes: required by the CONTEXT_TIME_WINDOW strategy"
    ]
    assert not WorkflowTrigger.objects.exists()


def test_add_form_stores_the_normalized_setting(admin_client, workflow):
    response = add(admin_client, workflow, '{"strategy": "TIME_WINDOW", "ttlMinutes": 5}')
    assert response.status_code == 302
    binding = WorkflowTrigger.objects.get()
    assert binding.idempotency_setting["ttlMinutes"] == 5
    assert binding.idempotency_setting["includeTriggerId"] is True


def test_change_form_links_to_the_preview_page(admin_client):
    binding = WorkflowTriggerFactory()
    response = admin_client.get(reverse("admin:triggers_workflowtrigger_change", args=[binding.pk]))
    preview_url = reverse("admin:triggers_workflowtrigger_preview_key", args=[binding.pk])
    assert preview_url in response.content.decode()


def test_preview_page_shows_the_generated_key(admin_client):
    binding = WorkflowTriggerFactory(
        idempotency_setting={
            "strategy": "CONTEXT_TIME_WINDOW",
            "contextFields": ["userId"],
            "ttlMinutes": 15,
        }
    )
    url = reverse("admin:triggers_workflowtrigger_preview_key", args=[binding.pk])
    assert admin_client.get(url).status_code == 200
    response = admin_client.post(
        url, {"context": '{"userId": "u7"}', "event_id": "", "at": "2024-05-01 09:23:00"}
    )
    window = int(datetime(2024, 5, 1, 9, 15, tzinfo=UTC).timestamp()) * 1000
    assert response.context["preview"].idempotency_key == (
        f"trigger_{binding.pk}_userId_u7_{window}"
    )
    assert f"trigger_{binding.pk}_userId_u7_{window}" in response.content.decode()


def test_preview_page_shows_why_a_binding_would_be_skipped(admin_client):
    binding = WorkflowTriggerFactory(
        idempotency_setting={
            "strategy": "CONTEXT_BASED",
            "contextFields": ["userId"],
            "failOnMissingContext": True,
        }
    )
    url = reverse("admin:triggers_workflowtrigger_preview_key", args=[binding.pk])
    response = admin_client.post(url, {"context": "{}", "event_id": "", "at": ""})
    assert response.context["preview"] is None
    assert "userId" in str(response.context["form"].errors)
    bad_json = admin_client.post(url, {"context": "{nope", "event_id": "", "at": ""})
    assert "context" in bad_json.context["form"].errors


def test_preview_page_of_unknown_binding_is_404(admin_client):
    url = reverse("admin:triggers_workflowtrigger_preview_key", args=[424242])
    assert admin_client.get(url).status_code == 404


def test_event_records_are_read_only(admin_client):
    WorkflowTriggerFactory(event_name="E")
    event_receive(name="E", event_id="ev-1", context={})
    record = EventRecord.objects.get()
    listing = admin_client.get(reverse("admin:triggers_eventrecord_changelist"))
    assert listing.status_code == 200 and "1 created" in listing.content.decode()
    change_url = reverse("admin:triggers_eventrecord_change", args=[record.pk])
    page = admin_client.get(change_url)
    assert page.status_code == 200 and 'name="_save"' not in page.content.decode()
    assert admin_client.get(reverse("admin:triggers_eventrecord_add")).status_code == 403
    assert (
        admin_client.post(
            reverse("admin:triggers_eventrecord_delete", args=[record.pk]), {"post": "yes"}
        ).status_code
        == 403
    )
    assert EventRecord.objects.filter(pk=record.pk).exists()


def test_operators_group_can_view_bindings_and_events():
    group = Group.objects.filter(name="operators").first()
    assert group is not None
    codenames = set(group.permissions.values_list("codename", flat=True))
    assert {"view_workflowtrigger", "view_eventrecord"} <= codenames
    assert "change_workflowtrigger" not in codenames
