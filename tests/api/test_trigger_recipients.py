"""POST /api/v1/triggers/ with ``recipients``: one instance per distinct
recipient under the request's key, per-recipient idempotency with no time limit,
inline upserts, lists through a fan-out, validation naming ``recipients[i]``."""

from __future__ import annotations

import threading

import pytest
import requests

from recipients.models import ListMembership, Recipient, RecipientList
from tests.factories import PAYLOAD, WorkflowFactory
from triggers.models import TriggerInstance
from triggers.models.fanouts import FanOut

pytestmark = pytest.mark.django_db


def post(api, recipients, key="k1", workflow="welcome", **extra):
    body = {"workflow": workflow, "idempotency_key": key, "payload": PAYLOAD}
    return api.post("/api/v1/triggers/", {**body, "recipients": recipients, **extra}, format="json")


@pytest.fixture
def welcome(db):
    return WorkflowFactory(key="welcome")


def test_one_instance_per_distinct_recipient_sharing_the_key(api, welcome):
    response = post(api, ["u1", {"id": "u2", "email": "b@example.com"}, "u1"])
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["workflow"] == "welcome" and body["idempotency_key"] == "k1"
    assert [(i["recipient"], i["status"]) for i in body["instances"]] == [
        ("u1", "created"),
        ("u2", "created"),
    ]
    assert "fanout" not in body
    rows = TriggerInstance.objects.filter(workflow=welcome, idempotency_key="k1")
    assert sorted(rows.values_list("recipient_id", flat=True)) == ["u1", "u2"]
    assert {i["id"] for i in body["instances"]} == {
        str(pk) for pk in rows.values_list("pk", flat=True)
    }


def test_unknown_ids_are_created_empty_and_inline_objects_upserted(api, welcome):
    Recipient.objects.create(id="u2", email="old@example.com", locale="fr")
    assert post(api, ["u1", {"id": "u2", "email": "new@example.com"}]).status_code == 201
    assert Recipient.objects.get(id="u1").email is None
    u2 = Recipient.objects.get(id="u2")
    assert (u2.email, u2.locale) == ("new@example.com", "fr")


def test_a_repeat_creates_nothing_and_says_so(api, welcome):
    first = post(api, ["u1", "u2"]).json()
    again = post(api, ["u2", "u1"])
    assert again.status_code == 200
    assert again.headers["Idempotent-Replayed"] == "true"
    by_recipient = {i["recipient"]: i for i in again.json()["instances"]}
    assert {r: i["status"] for r, i in by_recipient.items()} == {
        "u1": "duplicate",
        "u2": "duplicate",
    }
    assert {r: i["id"] for r, i in by_recipient.items()} == {
        i["recipient"]: i["id"] for i in first["instances"]
    }
    assert TriggerInstance.objects.filter(workflow=welcome).count() == 2


def test_a_partial_resend_creates_only_the_missing_ones(api, welcome):
    post(api, ["u1", "u2"])
    response = post(api, ["u1", "u2", "u3"])
    assert response.status_code == 201
    assert [i["status"] for i in response.json()["instances"]] == [
        "duplicate",
        "duplicate",
        "created",
    ]
    assert TriggerInstance.objects.filter(workflow=welcome).count() == 3


def test_payload_only_triggers_keep_their_answer(api, welcome):
    response = api.post(
        "/api/v1/triggers/",
        {"workflow": "welcome", "idempotency_key": "plain", "payload": PAYLOAD},
        format="json",
    )
    assert response.status_code == 201
    body = response.json()
    assert body["recipient"] is None and body["recipient_erased"] is False
    assert "instances" not in body


def test_the_same_key_serves_payload_only_and_people_triggers_apart(api, welcome):
    plain = {"workflow": "welcome", "idempotency_key": "k1", "payload": PAYLOAD}
    assert api.post("/api/v1/triggers/", plain, format="json").status_code == 201
    assert post(api, ["u1"]).status_code == 201
    replay = api.post("/api/v1/triggers/", plain, format="json")
    assert replay.status_code == 200 and replay.json()["recipient"] is None


def test_instance_shows_its_recipient(api, welcome):
    instance_id = post(api, ["u1"]).json()["instances"][0]["id"]
    body = api.get(f"/api/v1/triggers/{instance_id}/").json()
    assert body["recipient"] == "u1" and body["recipient_erased"] is False


def test_list_by_recipient_id(api, welcome):
    ids = {i["recipient"]: i["id"] for i in post(api, ["u1", "u2"]).json()["instances"]}
    found = api.get("/api/v1/triggers/", {"recipient": "u1"}).json()["results"]
    assert [row["id"] for row in found] == [ids["u1"]]


def test_a_list_entry_starts_a_fanout(api, welcome):
    team = RecipientList.objects.create(key="team", name="Team")
    for rid in ("m1", "m2", "u1"):
        ListMembership.objects.create(list=team, recipient=Recipient.objects.create(id=rid))
    response = post(api, ["u1", {"list": "team"}])
    assert response.status_code == 201
    body = response.json()
    fanout = FanOut.objects.get()
    assert body["fanout"] == {"id": str(fanout.pk), "status": "running", "expected": 2}
    assert fanout.excluded == ["u1"] and fanout.lists == ["team"]
    progress = api.get(f"/api/v1/fanouts/{fanout.pk}/").json()
    assert progress["status"] == "running" and progress["expected"] == 2
    again = post(api, [{"list": "team"}, "u1"])
    assert again.status_code == 200 and again.json()["fanout"]["id"] == str(fanout.pk)


@pytest.mark.parametrize(
    ("entry", "code"),
    [
        ({"list": "nope"}, "unknown_list"),
        ({"id": "x", "phone": "12"}, "invalid_phone"),
        ({"id": "x", "timezone": "Mars/Olympus"}, "invalid_timezone"),
        ("", "invalid_recipient"),
        (7, "invalid_recipient"),
        ({"list": "team", "id": "x"}, "invalid_list"),
    ],
)
def test_a_bad_entry_is_a_400_naming_it(api, welcome, entry, code):
    RecipientList.objects.create(key="team")
    response = post(api, ["a", "b", "c", entry])
    assert response.status_code == 400, response.json()
    body = response.json()
    assert body["code"] == code
    assert body["field"].startswith("recipients[3]")
    assert not TriggerInstance.objects.exists() and not Recipient.objects.exists()


def test_more_than_1000_entries_is_a_400(api, welcome):
    response = post(api, [f"r{n}" for n in range(1001)])
    assert response.status_code == 400
    assert response.json()["code"] == "too_many_recipients"
    assert response.json()["field"] == "recipients"


def test_an_empty_recipients_list_is_a_400(api, welcome):
    response = post(api, [])
    assert response.status_code == 400
    assert (response.json()["code"], response.json()["field"]) == ("empty_recipients", "recipients")


@pytest.mark.parametrize("recipients", ["ada", {"list": "readers"}, 7])
def test_recipients_that_are_not_a_list_is_a_400(api, welcome, recipients):
    response = post(api, recipients)
    assert response.status_code == 400
    assert (response.json()["code"], response.json()["field"]) == ("not_a_list", "recipients")


def test_1000_entries_create_1000_instances(api, welcome):
    response = post(api, [{"id": f"r{n}", "email": f"r{n}@example.com"} for n in range(1000)])
    assert response.status_code == 201
    assert TriggerInstance.objects.filter(workflow=welcome).count() == 1000


def test_bulk_items_may_name_recipients(api, welcome):
    items = [
        {
            "workflow": "welcome",
            "idempotency_key": "a",
            "payload": PAYLOAD,
            "recipients": ["u1", "u2"],
        },
        {"workflow": "welcome", "idempotency_key": "b", "payload": PAYLOAD},
        {
            "workflow": "welcome",
            "idempotency_key": "c",
            "payload": PAYLOAD,
            "recipients": [{"list": "none"}],
        },
    ]
    results = api.post("/api/v1/triggers/bulk/", {"items": items}, format="json").json()["results"]
    assert [r["status"] for r in results] == ["created", "created", "invalid"]
    assert [i["recipient"] for i in results[0]["instances"]] == ["u1", "u2"]
    assert results[2]["error"]["code"] == "unknown_list"
    again = api.post("/api/v1/triggers/bulk/", {"items": items[:1]}, format="json").json()
    assert again["results"][0]["status"] == "duplicate"


def test_cancel_by_key_cancels_every_instance_of_the_key(api, welcome):
    post(api, ["u1", "u2"])
    response = api.post(
        "/api/v1/triggers/cancel/",
        {"workflow": "welcome", "idempotency_key": "k1", "reason": "oops"},
        format="json",
    )
    assert response.status_code == 200
    assert response.json() == {
        "workflow": "welcome",
        "idempotency_key": "k1",
        "cancelled": 2,
        "already_finished": 0,
        "fanout": None,
    }
    assert set(TriggerInstance.objects.values_list("status", flat=True)) == {"cancelled"}


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_identical_requests_create_each_instance_once(live_server):
    from api_keys.services import api_key_create

    WorkflowFactory(key="welcome")
    raw = api_key_create(name="race")[1]
    body = {
        "workflow": "welcome",
        "idempotency_key": "same",
        "payload": PAYLOAD,
        "recipients": [{"id": f"p{n}", "email": f"p{n}@example.com"} for n in range(50)],
    }
    barrier = threading.Barrier(12)
    answers: list[tuple[int, dict]] = []
    lock = threading.Lock()

    def fire():
        session = requests.Session()
        session.get(f"{live_server.url}/healthz", timeout=30)
        barrier.wait()
        response = session.post(
            f"{live_server.url}/api/v1/triggers/",
            json=body,
            headers={"Authorization": f"Bearer {raw}"},
            timeout=60,
        )
        with lock:
            answers.append((response.status_code, response.json()))

    threads = [threading.Thread(target=fire) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(code in (200, 201) for code, _ in answers), answers
    assert TriggerInstance.objects.filter(idempotency_key="same").count() == 50
    ids_by_recipient: dict[str, set[str]] = {}
    created = 0
    for _code, answer in answers:
        for i in answer["instances"]:
            ids_by_recipient.setdefault(i["recipient"], set()).add(i["id"])
            created += i["status"] == "created"
    assert created == 50
    assert all(len(ids) == 1 for ids in ids_by_recipient.values())


def test_an_events_context_recipients_trigger_those_people_through_its_bindings(api, welcome):
    from tests.factories import WorkflowTriggerFactory
    from triggers.idempotency.config import IdempotencySettings

    WorkflowTriggerFactory(
        event_name="signup",
        workflow=welcome,
        idempotency_setting=IdempotencySettings.parse(
            {"strategy": "EVENT_BASED", "includeEventId": True}
        ).to_json(),
    )
    body = {
        "name": "signup",
        "event_id": "e-1",
        "context": {"plan": "pro", "recipients": ["u1", {"id": "u2", "email": "u2@example.com"}]},
    }
    response = api.post("/api/v1/events/", body, format="json")
    assert response.status_code == 202, response.json()
    (outcome,) = response.json()["outcomes"]
    assert outcome["status"] == "created"
    assert [(i["recipient"], i["status"]) for i in outcome["instances"]] == [
        ("u1", "created"),
        ("u2", "created"),
    ]
    rows = TriggerInstance.objects.filter(workflow=welcome)
    assert sorted(rows.values_list("recipient_id", flat=True)) == ["u1", "u2"]
    assert rows.first().payload == {"plan": "pro"}
    again = api.post("/api/v1/events/", body, format="json").json()["outcomes"][0]
    assert again["status"] == "duplicate"
    assert {i["status"] for i in again["instances"]} == {"duplicate"}


def test_a_bad_context_recipient_is_a_400_naming_it(api, welcome):
    body = {"name": "signup", "context": {"recipients": ["ok", {"id": "x", "phone": "1"}]}}
    response = api.post("/api/v1/events/", body, format="json")
    assert response.status_code == 400
    assert response.json()["field"] == "context.recipients[1].phone"
    assert response.json()["code"] == "invalid_phone"


def test_a_trigger_key_reads_only_its_own_fanouts(api, welcome):
    from rest_framework.test import APIClient

    from api_keys.services import api_key_create

    RecipientList.objects.create(key="team")
    fanout_id = post(api, [{"list": "team"}]).json()["fanout"]["id"]
    other = APIClient()
    other.credentials(
        HTTP_AUTHORIZATION=f"Bearer {api_key_create(name='other', scope='trigger')[1]}"
    )
    assert other.get(f"/api/v1/fanouts/{fanout_id}/").status_code == 404
    assert api.get(f"/api/v1/fanouts/{fanout_id}/").status_code == 200
    assert api.get("/api/v1/fanouts/0191a2b3-1111-7abc-8def-000000000001/").status_code == 404
