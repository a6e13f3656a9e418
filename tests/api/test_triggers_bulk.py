"""POST /api/v1/triggers/bulk/: up to 1,000 triggers in one request, each item created,
replayed or refused on its own with the single POST's semantics."""

from __future__ import annotations

import json
import logging
import threading

import pytest
import requests

from tests.factories import PAYLOAD, WorkflowFactory, email_sms_definition
from tests.worker import celery_worker, flush_broker, wait_until
from triggers.models import TriggerInstance, TriggerStatus, TriggerStatusChange
from triggers.models.inbox import Interest
from triggers.services import trigger_create

pytestmark = pytest.mark.both_databases

BULK = "/api/v1/triggers/bulk/"


@pytest.fixture
def published(monkeypatch):
    """The instance ids the bulk call hands the broker (one pipelined publish per call),
    recorded instead of sent."""
    batches: list[list[str]] = []

    def record(name, args_list, queue=None):
        batches.append([args[0] for args in args_list])

    monkeypatch.setattr("triggers.dispatch.send_tasks_on_commit", record)
    return batches


def bulk(api, items, **extra):
    return api.post(BULK, {"items": items}, format="json", **extra)


def item(workflow, key, payload=None):
    return {"workflow": workflow.key, "idempotency_key": key, "payload": payload or PAYLOAD}


def single_error(api, body):
    """What the single POST answers for ``body`` (its error), to compare item errors with."""
    response = api.post("/api/v1/triggers/", json.dumps(body), content_type="application/json")
    assert response.status_code in (400, 413), response.json()
    return response.json()


@pytest.mark.django_db
def test_every_item_is_created_with_its_audit_row_interests_and_first_step(api, published):
    definition = {**email_sms_definition(), "interests": ["user:{{ payload.email }}"]}
    workflow = WorkflowFactory(definition=definition)
    items = [item(workflow, f"k{i}", {**PAYLOAD, "email": f"u{i}@example.com"}) for i in range(5)]

    response = bulk(api, items)

    assert response.status_code == 200, response.json()
    results = response.json()["results"]
    assert [(r["index"], r["status"]) for r in results] == [(i, "created") for i in range(5)]
    assert all("error" not in r for r in results)
    for i, result in enumerate(results):
        instance = TriggerInstance.objects.get(pk=result["id"])
        assert instance.idempotency_key == f"k{i}"
        assert instance.payload["email"] == f"u{i}@example.com"
        assert (instance.status, instance.current_node_id) == (TriggerStatus.ENQUEUED, "hello")
        assert instance.workflow_version == workflow.current_version
        assert instance.dispatched_at is not None
        audit = TriggerStatusChange.objects.get(instance=instance)
        # The key's name is the audited actor and the instance's creator (scoped keys).
        assert (audit.from_status, audit.to_status, audit.actor) == ("", "enqueued", "api:tests")
        assert instance.created_by_key == "tests"
        assert audit.at == instance.created_at
        assert list(
            Interest.objects.filter(instance=instance).values_list("subject", flat=True)
        ) == [f"user:u{i}@example.com"]
    # One publish for the whole request, every created instance in it, in order.
    assert published == [[r["id"] for r in results]]


@pytest.mark.django_db
def test_a_bulk_created_instance_has_every_column_the_single_post_writes(api, published):
    workflow = WorkflowFactory(
        definition={**email_sms_definition(), "interests": ["user:{{ payload.email }}"]}
    )
    posted = api.post("/api/v1/triggers/", item(workflow, "one"), format="json")
    single = TriggerInstance.objects.get(pk=posted.json()["id"])
    [result] = bulk(api, [item(workflow, "many")]).json()["results"]
    single.refresh_from_db()
    many = TriggerInstance.objects.get(pk=result["id"])
    differ = {"id", "idempotency_key", "available_at", "dispatched_at", "created_at", "updated_at"}
    for column in TriggerInstance._meta.concrete_fields:
        if column.attname not in differ:
            assert getattr(many, column.attname) == getattr(single, column.attname), column.name
    assert many.available_at == many.dispatched_at == many.created_at == many.updated_at
    changes = [
        TriggerStatusChange.objects.filter(instance=i).values(
            "from_status", "to_status", "reason", "actor", "details"
        )[0]
        for i in (single, many)
    ]
    assert changes[0] == changes[1]
    assert list(Interest.objects.filter(instance=many).values_list("subject", flat=True)) == list(
        Interest.objects.filter(instance=single).values_list("subject", flat=True)
    )


@pytest.mark.django_db
def test_replaying_the_same_items_answers_duplicate_with_the_same_ids(api, published):
    workflow = WorkflowFactory()
    items = [item(workflow, f"k{i}") for i in range(4)]
    first = bulk(api, items).json()["results"]
    again = bulk(api, [{**i, "payload": {"other": 1}} for i in items]).json()["results"]

    assert [r["status"] for r in again] == ["duplicate"] * 4
    assert [r["id"] for r in again] == [r["id"] for r in first]
    assert TriggerInstance.objects.count() == 4
    assert TriggerStatusChange.objects.count() == 4
    assert list(TriggerInstance.objects.values_list("payload", flat=True)) == [PAYLOAD] * 4
    assert published == [[r["id"] for r in first]]  # the replay sends nothing


@pytest.mark.django_db
def test_an_item_replays_an_instance_the_single_post_created(api, published):
    workflow = WorkflowFactory()
    existing = trigger_create(workflow=workflow.key, idempotency_key="k", payload={}).instance
    # Deactivated since: a replay still answers what the first call did, as the single POST.
    workflow.is_active = False
    workflow.save()
    results = bulk(api, [item(workflow, "k"), item(workflow, "new")]).json()["results"]
    assert results[0] == {"index": 0, "status": "duplicate", "id": str(existing.pk)}
    assert results[1]["status"] == "invalid"
    assert results[1]["error"]["code"] == "inactive_workflow"
    assert published == []


@pytest.mark.django_db
def test_a_bad_item_rejects_nothing_else_and_says_what_the_single_post_would(
    api, published, settings
):
    settings.NOTIFYFLOW_MAX_PAYLOAD_BYTES = 1024
    workflow = WorkflowFactory()
    inactive = WorkflowFactory(is_active=False)
    bad = {
        1: {"workflow": "no-such-workflow", "idempotency_key": "a", "payload": {}},
        2: {"workflow": workflow.key, "payload": {}},  # no key
        3: {"workflow": workflow.key, "idempotency_key": "", "payload": {}},
        4: {"workflow": workflow.key, "idempotency_key": "b", "payload": [1, 2]},
        5: {"workflow": workflow.key, "idempotency_key": "c", "payload": {"x": "y" * 2000}},
        6: {"workflow": inactive.key, "idempotency_key": "d", "payload": {}},
        7: {"workflow": workflow.key, "idempotency_key": "e", "payload": {"n": float("nan")}},
        8: {"workflow": workflow.key, "idempotency_key": "f", "payload": {"s": "a\x00b"}},
        9: {"workflow": 12, "idempotency_key": "g", "payload": {}},
        10: {"workflow": workflow.key, "idempotency_key": "h" * 256, "payload": {}},
    }
    items = [item(workflow, "ok-0"), *bad.values(), item(workflow, "ok-1")]
    body = json.dumps({"items": [*items, "not an object"]})  # json.dumps writes NaN

    response = api.post(BULK, body, content_type="application/json")

    assert response.status_code == 200, response.json()
    results = response.json()["results"]
    assert len(results) == len(items) + 1
    assert [r["status"] for r in results] == ["created"] + ["invalid"] * 10 + [
        "created",
        "invalid",
    ]
    for index, raw in bad.items():
        error = results[index]["error"]
        expected = single_error(api, raw)
        assert error == expected, (index, error, expected)
        assert "id" not in results[index]
    codes = {index: results[index]["error"]["code"] for index in bad}
    assert codes == {
        1: "unknown_workflow",
        2: "required",
        3: "required",
        4: "not_an_object",
        5: "payload_too_large",
        6: "inactive_workflow",
        7: "invalid_number",
        8: "nul_character",
        9: "required",
        10: "too_long",
    }
    assert results[2]["error"]["field"] == "idempotency_key"
    assert results[5]["error"]["field"] == "payload"
    assert results[7]["error"]["field"] == "payload.n"
    assert results[-1]["error"] == {
        "code": "not_an_object",
        "field": "body",
        "message": "body: must be a JSON object",
        "errors": [
            {"code": "not_an_object", "field": "body", "message": "body: must be a JSON object"}
        ],
    }
    assert set(TriggerInstance.objects.values_list("idempotency_key", flat=True)) == {
        "ok-0",
        "ok-1",
    }
    assert published == [[results[0]["id"], results[11]["id"]]]


@pytest.mark.django_db
def test_the_same_key_twice_in_one_request_is_a_duplicate_of_the_first(api, published):
    workflow = WorkflowFactory()
    items = [
        item(workflow, "same", {"n": 1}),
        item(workflow, "other"),
        item(workflow, "same", {"n": 2}),  # another payload: replayed, as the single POST
        item(workflow, "same", {"n": 1}),
    ]
    results = bulk(api, items).json()["results"]
    assert [r["status"] for r in results] == ["created", "created", "duplicate", "duplicate"]
    assert results[2]["id"] == results[3]["id"] == results[0]["id"]
    assert TriggerInstance.objects.get(idempotency_key="same").payload == {"n": 1}
    assert TriggerInstance.objects.count() == 2
    assert published == [[results[0]["id"], results[1]["id"]]]


@pytest.mark.django_db
def test_a_refused_item_does_not_take_its_key_from_a_later_valid_one(api, published):
    workflow = WorkflowFactory(
        definition={**email_sms_definition(), "interests": ["{{ payload.order }}"]}
    )
    items = [
        item(workflow, "k", {"order": ""}),  # its interest renders to nothing: refused
        item(workflow, "k", {"order": "o-1"}),
        item(workflow, "k", {"order": "o-2"}),
    ]
    results = bulk(api, items).json()["results"]
    assert [r["status"] for r in results] == ["invalid", "created", "duplicate"]
    assert results[0]["error"]["code"] == "invalid_interest"
    assert results[2]["id"] == results[1]["id"]
    assert TriggerInstance.objects.get(idempotency_key="k").payload == {"order": "o-1"}


@pytest.mark.django_db
def test_one_thousand_items_are_accepted_and_more_are_refused_whole(api, published):
    workflow = WorkflowFactory()
    many = [item(workflow, f"k{i}", {}) for i in range(1001)]
    refused = bulk(api, many)
    assert refused.status_code == 400
    assert refused.json()["code"] == "too_many_items"
    assert refused.json()["field"] == "items"
    assert TriggerInstance.objects.count() == 0

    accepted = bulk(api, many[:1000])
    assert accepted.status_code == 200
    assert {r["status"] for r in accepted.json()["results"]} == {"created"}
    assert TriggerInstance.objects.count() == 1000
    assert TriggerStatusChange.objects.count() == 1000
    assert len(published) == 1 and len(published[0]) == 1000


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ("[]", "not_an_object", "body"),
        ("{}", "required", "items"),
        ('{"items": {"workflow": "x"}}', "not_a_list", "items"),
        ('{"items": "abc"}', "not_a_list", "items"),
        ('{"items": null}', "null", "items"),
        ('{"items": [', "malformed_json", "body"),
    ],
)
def test_a_malformed_envelope_is_400_with_a_stable_code(api, published, body, code, field):
    response = api.post(BULK, body, content_type="application/json")
    assert response.status_code == 400
    assert (response.json()["code"], response.json()["field"]) == (code, field)
    assert published == []


@pytest.mark.django_db
def test_an_empty_list_creates_nothing(api, published):
    response = bulk(api, [])
    assert (response.status_code, response.json()) == (200, {"results": []})


@pytest.mark.django_db
def test_a_body_over_the_bulk_limit_is_refused_unread(api, published, settings):
    settings.NOTIFYFLOW_MAX_BULK_BODY_BYTES = 10_000
    workflow = WorkflowFactory()
    response = bulk(api, [item(workflow, f"k{i}", {"x": "y" * 100}) for i in range(100)])
    assert response.status_code == 413
    assert (response.json()["code"], response.json()["field"]) == ("payload_too_large", "body")


@pytest.mark.django_db
def test_bulk_needs_an_api_key(client):
    response = client.post(BULK, {"items": []}, content_type="application/json")
    assert response.status_code == 401


@pytest.mark.django_db
def _fail_publish(monkeypatch, how):
    from django.conf import settings
    from kombu.exceptions import OperationalError

    from notifyflow.celery import app, publisher
    from triggers.dispatch import lane_queue

    if how in ("fast", "flush"):
        # Redis gone after this process declared the queue: the Redis mirror's own
        # pipeline (fast), or kombu's batch flush, outside its retrying publish (flush:
        # kombu raises BatchPublishError then, "delivery is uncertain", not the
        # connection error itself).
        import redis

        monkeypatch.setattr(settings, "NOTIFYFLOW_FAST_PUBLISH", how == "fast")
        with app.producer_or_acquire() as producer:  # a real publish declares the queue
            publisher.publish(
                producer,
                "notifyflow.execute_node",
                [("declare",)],
                None,
                queue=lane_queue("normal"),
            )

        def execute(self, *args, **kwargs):
            raise redis.exceptions.ConnectionError("Connection refused")

        monkeypatch.setattr(redis.client.Pipeline, "execute", execute)
        return
    # kombu's publish, Celery's send_task for every message
    monkeypatch.setattr(settings, "NOTIFYFLOW_FAST_PUBLISH", False)

    def send_task_message(*args, **kwargs):
        raise OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(app.amqp, "send_task_message", send_task_message)


@pytest.mark.broker
@pytest.mark.django_db
@pytest.mark.parametrize(
    "how",
    [
        "publish",
        pytest.param("flush", marks=pytest.mark.redis_only("kombu's pipelined Redis flush")),
        pytest.param("fast", marks=pytest.mark.redis_only("the fast publish path")),
    ],
)
def test_an_unreachable_broker_leaves_the_messages_to_the_sweeper(
    api, monkeypatch, caplog, django_capture_on_commit_callbacks, how
):
    """The failure semantics of send_task_on_commit: logged, the API still answers and
    the rows are committed with their dispatched_at (the sweeper re-sends them) - on
    kombu's publish, its pipelined flush, and the Redis mirror (NOTIFYFLOW_FAST_PUBLISH)."""
    workflow = WorkflowFactory()
    _fail_publish(monkeypatch, how)
    with (
        caplog.at_level(logging.WARNING, logger="notifyflow.celery"),
        django_capture_on_commit_callbacks(execute=True) as callbacks,
    ):
        response = bulk(api, [item(workflow, "a"), item(workflow, "b")])
    assert len(callbacks) == 1
    assert response.status_code == 200
    assert [r["status"] for r in response.json()["results"]] == ["created", "created"]
    assert "2 notifyflow.execute_node messages left for the sweeper" in caplog.text
    assert TriggerInstance.objects.filter(dispatched_at__isnull=False).count() == 2


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_bulk_created_instances_run_to_completion_on_a_real_worker(api, tmp_path):
    flush_broker()
    workflow = WorkflowFactory()
    items = [item(workflow, f"k{i}") for i in range(30)]
    with celery_worker(tmp_path):
        response = bulk(api, items, HTTP_X_REQUEST_ID="bulk-req-7")
        ids = [r["id"] for r in response.json()["results"]]
        assert len(ids) == 30
        wait_until(
            lambda: (
                TriggerInstance.objects.filter(pk__in=ids, status=TriggerStatus.COMPLETED).count()
                == 30
            ),
            timeout=180,
            what="30 bulk-created instances to complete",
        )
    assert not TriggerInstance.objects.exclude(status=TriggerStatus.COMPLETED).exists()
    # The request id travelled with every first message to the worker's log lines.
    log = (tmp_path / "worker-w1.log").read_text()
    assert "bulk-req-7" in log


@pytest.mark.postgres
@pytest.mark.broker  # each created instance's message is published for real
@pytest.mark.django_db(transaction=True)
def test_concurrent_bulk_requests_with_overlapping_keys_create_each_key_once(live_server):
    from api_keys.services import api_key_create

    workflow = WorkflowFactory()
    raw = api_key_create(name="race")[1]
    # Eight requests; request n posts keys n*25 .. n*25+99: each key in up to four of them,
    # in different orders.
    bodies = []
    for n in range(8):
        keys = [f"k{k}" for k in range(n * 25, n * 25 + 100)]
        if n % 2:
            keys.reverse()
        bodies.append({"items": [item(workflow, key, {"n": n}) for key in keys]})
    barrier = threading.Barrier(len(bodies))
    answers: list[tuple[int, dict]] = []
    lock = threading.Lock()

    def fire(body):
        session = requests.Session()
        session.get(f"{live_server.url}/healthz", timeout=30)
        barrier.wait()
        response = session.post(
            f"{live_server.url}{BULK}",
            json=body,
            headers={"Authorization": f"Bearer {raw}"},
            timeout=60,
        )
        with lock:
            answers.append((response.status_code, response.json(), body))

    threads = [threading.Thread(target=fire, args=(body,)) for body in bodies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(code for code, _, _ in answers) == [200] * len(bodies)
    ids = dict(
        TriggerInstance.objects.filter(workflow=workflow).values_list("idempotency_key", "id")
    )
    assert len(ids) == len({i["idempotency_key"] for b in bodies for i in b["items"]}) == 275
    created = 0
    for _, answer, body in answers:
        for result, sent in zip(answer["results"], body["items"], strict=True):
            assert result["status"] in ("created", "duplicate"), result
            assert result["id"] == str(ids[sent["idempotency_key"]])
            created += result["status"] == "created"
    assert created == 275
    assert TriggerStatusChange.objects.filter(instance__workflow=workflow).count() == 275
