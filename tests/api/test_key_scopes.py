"""Scoped API keys (issue 12 item 2): trigger / read / admin, optional workflow limit,
403 permission_denied, the key's name recorded on instances and audit rows."""

from __future__ import annotations

import pytest
from django.http import HttpRequest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from api_keys.models import ApiKey
from api_keys.services import api_key_create
from tests.admin_helpers import PASSWORD, make_superuser
from tests.factories import PAYLOAD, TriggerInstanceFactory, WorkflowFactory, WorkflowTriggerFactory
from triggers.models import TriggerInstance

pytestmark = pytest.mark.django_db


def client(scope: str, name: str | None = None, workflows: tuple[str, ...] = ()) -> APIClient:
    raw = api_key_create(name=name or f"{scope}-key", scope=scope, workflows=workflows)[1]
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return api


def _trigger(api: APIClient, workflow, key: str = "k1"):
    return api.post(
        "/api/v1/triggers/",
        {"workflow": workflow.key, "idempotency_key": key, "payload": PAYLOAD},
        format="json",
    )


def _forbidden(response) -> None:
    assert response.status_code == 403, response.content
    assert response.json()["code"] == "permission_denied"


def test_trigger_key_creates_and_reads_only_its_own_instances(workflow):
    mine, other = client("trigger", "svc-a"), client("trigger", "svc-b")
    created = _trigger(mine, workflow)
    assert created.status_code == 201
    instance = TriggerInstance.objects.get(pk=created.json()["id"])
    assert instance.created_by_key == "svc-a"
    assert instance.status_changes.get().actor == "api:svc-a"
    url = f"/api/v1/triggers/{instance.pk}/"
    assert mine.get(url).status_code == 200
    assert mine.get(url + "steps/").status_code == 200
    assert [i["id"] for i in mine.get("/api/v1/triggers/").json()["results"]] == [str(instance.pk)]
    assert other.get(url).status_code == 404
    assert other.get(url + "steps/").status_code == 404
    assert other.get("/api/v1/triggers/").json()["results"] == []


def test_trigger_key_cannot_read_logs_or_change_anything(workflow):
    api = client("trigger")
    instance = TriggerInstanceFactory(workflow=workflow)
    binding = WorkflowTriggerFactory(workflow=workflow)
    _forbidden(api.get("/api/v1/step-logs/"))
    _forbidden(api.get("/api/v1/workflows/"))
    _forbidden(api.put(f"/api/v1/workflows/{workflow.key}/", {}, format="json"))
    _forbidden(api.delete(f"/api/v1/workflow-triggers/{binding.pk}/"))
    _forbidden(api.post(f"/api/v1/triggers/{instance.pk}/cancel/", {}, format="json"))
    _forbidden(api.post(f"/api/v1/workflows/{workflow.key}/pause/"))
    assert ApiKey.objects.filter(scope="trigger").exists()


def test_trigger_key_posts_events_and_created_instances_are_its_own(workflow):
    api = client("trigger", "events-svc")
    WorkflowTriggerFactory(workflow=workflow, event_name="SIGNED_UP")
    response = api.post("/api/v1/events/", {"name": "SIGNED_UP", "context": PAYLOAD}, format="json")
    assert response.status_code == 202
    instance_id = response.json()["outcomes"][0]["instance_id"]
    assert TriggerInstance.objects.get(pk=instance_id).created_by_key == "events-svc"
    assert api.get(f"/api/v1/triggers/{instance_id}/").status_code == 200


def test_read_key_reads_everything_but_writes_nothing(workflow):
    api = client("read")
    instance = TriggerInstanceFactory(workflow=workflow)
    assert api.get(f"/api/v1/triggers/{instance.pk}/").status_code == 200
    assert api.get("/api/v1/step-logs/").status_code == 200
    assert api.get("/api/v1/workflows/").status_code == 200
    assert api.get("/api/v1/workflow-triggers/").status_code == 200
    _forbidden(_trigger(api, workflow))
    _forbidden(api.post("/api/v1/events/", {"name": "X", "context": {}}, format="json"))
    _forbidden(api.post("/api/v1/workflows/", {}, format="json"))
    _forbidden(api.post(f"/api/v1/triggers/{instance.pk}/cancel/", {}, format="json"))


def test_admin_key_does_everything_and_is_the_audited_actor(workflow):
    api = client("admin", "ops")
    instance = TriggerInstanceFactory(workflow=workflow)
    response = api.post(f"/api/v1/triggers/{instance.pk}/cancel/", {}, format="json")
    assert response.status_code == 200
    assert instance.status_changes.last().actor == "api:ops"


def test_key_limited_to_workflows_sees_and_uses_only_those():
    allowed, other = WorkflowFactory(key="allowed"), WorkflowFactory(key="other")
    api = client("admin", workflows=("allowed",))
    assert _trigger(api, allowed).status_code == 201
    _forbidden(_trigger(api, other))
    hidden = TriggerInstanceFactory(workflow=other)
    assert api.get(f"/api/v1/triggers/{hidden.pk}/").status_code == 404
    assert [w["key"] for w in api.get("/api/v1/workflows/").json()["results"]] == ["allowed"]
    assert api.get("/api/v1/workflows/other/").status_code == 404
    _forbidden(
        api.post(
            "/api/v1/workflow-triggers/",
            {"event_name": "E", "workflow": "other"},
            format="json",
        )
    )


def test_key_limited_to_workflows_cannot_reach_other_instances_or_workflows():
    WorkflowFactory(key="allowed")
    other = WorkflowFactory(key="other")
    hidden = TriggerInstanceFactory(workflow=other)
    api = client("admin", workflows=("allowed",))
    for suffix in ("steps/", "timeline/", "deliveries/"):
        assert api.get(f"/api/v1/triggers/{hidden.pk}/{suffix}").status_code == 404, suffix
    for action in ("cancel/", "retry/", "run-now/", "events/"):
        body = {"name": "go"} if action == "events/" else {}
        response = api.post(f"/api/v1/triggers/{hidden.pk}/{action}", body, format="json")
        assert response.status_code == 404, action
    assert api.get("/api/v1/workflows/other/stats/").status_code == 404
    assert api.get("/api/v1/workflows/other/diagram/").status_code == 404
    preview = api.post("/api/v1/workflows/other/preview/", {"payload": PAYLOAD}, format="json")
    assert preview.status_code == 404
    hidden.refresh_from_db()
    assert hidden.status == "enqueued"  # nothing was done to it
    assert api.get("/api/v1/workflows/allowed/stats/").status_code == 200


def test_trigger_key_reads_the_timeline_and_deliveries_of_its_own_instances_only(workflow):
    mine, other = client("trigger", "svc-a"), client("trigger", "svc-b")
    instance_id = _trigger(mine, workflow).json()["id"]
    for suffix in ("timeline/", "deliveries/"):
        assert mine.get(f"/api/v1/triggers/{instance_id}/{suffix}").status_code == 200, suffix
        assert other.get(f"/api/v1/triggers/{instance_id}/{suffix}").status_code == 404, suffix
    # Preview is a read: a read key may, a trigger key may not.
    payload = {"payload": PAYLOAD}
    url = f"/api/v1/workflows/{workflow.key}/preview/"
    assert client("read").post(url, payload, format="json").status_code == 200
    _forbidden(mine.post(url, payload, format="json"))


def test_admin_creates_a_key_with_a_scope():
    web = Client()
    user = make_superuser()
    assert web.login(request=HttpRequest(), username=user.username, password=PASSWORD)
    response = web.post(reverse("admin:api_keys_apikey_add"), {"name": "ro", "scope": "read"})
    assert response.status_code == 200
    assert ApiKey.objects.get(name="ro").scope == "read"
    page = web.get(reverse("admin:api_keys_apikey_changelist")).content.decode()
    assert "read" in page


def test_bulk_triggers_follow_the_keys_scope_and_workflow_list():
    allowed, other = WorkflowFactory(key="allowed"), WorkflowFactory(key="other")
    api = client("trigger", "bulk-svc", workflows=("allowed",))
    items = [
        {"workflow": allowed.key, "idempotency_key": "a1", "payload": PAYLOAD},
        {"workflow": other.key, "idempotency_key": "o1", "payload": PAYLOAD},
    ]
    response = api.post("/api/v1/triggers/bulk/", {"items": items}, format="json")
    assert response.status_code == 200, response.content
    created, refused = response.json()["results"]
    assert created["status"] == "created"
    assert refused["status"] == "invalid"
    assert refused["error"]["code"] == "permission_denied"
    assert refused["error"]["field"] == "workflow"
    instance = TriggerInstance.objects.get(pk=created["id"])
    assert instance.created_by_key == "bulk-svc"
    assert instance.status_changes.get().actor == "api:bulk-svc"
    assert not TriggerInstance.objects.filter(workflow=other).exists()
    assert api.get(f"/api/v1/triggers/{instance.pk}/").status_code == 200
    _forbidden(client("read").post("/api/v1/triggers/bulk/", {"items": items}, format="json"))
