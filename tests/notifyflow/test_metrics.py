"""GET /metrics and /readyz: Prometheus text format, notifyflow_ names,
counters that move when things happen - in this process and in a real worker's
(multiprocess mode) - queue figures from the database, loopback-or-token access."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from executions import engine
from executions.outcomes import StepOutcome
from tests.factories import PAYLOAD, TriggerInstanceFactory, WorkflowFactory
from tests.worker import celery_worker, flush_broker, wait_until
from triggers.models import TriggerInstance, TriggerStatus
from triggers.services import trigger_create

S = TriggerStatus


def scrape(client: Client | None = None, **headers) -> dict[tuple, float]:
    """Every sample of /metrics as {(sample name, ((label, value), ...)): value}."""
    response = (client or Client()).get("/metrics", **headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.mark.django_db
def test_metrics_parse_and_follow_the_naming_rules():
    TriggerInstanceFactory(workflow=WorkflowFactory())  # some queue figures to show
    text = Client().get("/metrics").content.decode()
    families = list(text_string_to_metric_families(text))
    assert families
    for family in families:
        assert family.name.startswith("notifyflow_"), family.name
        if family.type == "counter":
            assert all(s.name.endswith("_total") for s in family.samples), family.samples
    names = {f.name for f in families}
    assert {
        "notifyflow_instances",
        "notifyflow_due_backlog",
        "notifyflow_oldest_due_age_seconds",
        "notifyflow_queue_figures_up",
        "notifyflow_lane_due_backlog",
        "notifyflow_lane_oldest_due_age_seconds",
    } <= names
    # One family per name (the exposition never repeats a TYPE line).
    assert text.count("# TYPE notifyflow_instances ") == 1


@pytest.mark.django_db
def test_trigger_and_step_counters_move(api, workflow, dispatched):
    before = scrape()
    body = {"workflow": workflow.key, "idempotency_key": "m1", "payload": PAYLOAD}
    created = api.post("/api/v1/triggers/", body, format="json").json()
    api.post("/api/v1/triggers/", body, format="json")
    assert engine.step_execute(instance_id=created["id"]) == StepOutcome.ADVANCED
    after = scrape()

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("notifyflow_triggers_total", outcome="created") == 1
    assert moved("notifyflow_triggers_total", outcome="replayed") == 1
    assert moved("notifyflow_steps_total", node_type="email", outcome="success") == 1
    assert moved("notifyflow_step_duration_seconds_count", node_type="email") == 1
    assert moved("notifyflow_provider_send_seconds_count", channel="email", outcome="sent") == 1


@pytest.mark.django_db
def test_events_cancellations_and_retries_are_counted(api, workflow, dispatched, monkeypatch):
    from executions.providers.base import ProviderError
    from workflows.definition import node_types

    before = scrape()
    api.post("/api/v1/events/", {"name": "NOBODY_LISTENS", "context": {}}, format="json")
    doomed = trigger_create(workflow=workflow, idempotency_key="c", payload=PAYLOAD).instance
    api.post(f"/api/v1/triggers/{doomed.pk}/cancel/", {}, format="json")

    def flaky(step):
        raise ProviderError("503 from provider", permanent=False)

    monkeypatch.setattr(node_types.get("email"), "run", flaky)
    retried = trigger_create(workflow=workflow, idempotency_key="r", payload=PAYLOAD).instance
    assert engine.step_execute(instance_id=retried.pk) == StepOutcome.FAILED_TRANSIENT
    after = scrape()
    assert (
        value(after, "notifyflow_events_received_total")
        - value(before, "notifyflow_events_received_total")
        == 1
    )
    assert (
        value(after, "notifyflow_instances_cancelled_total")
        - value(before, "notifyflow_instances_cancelled_total")
        == 1
    )
    assert (
        value(after, "notifyflow_retries_total", by="engine")
        - value(before, "notifyflow_retries_total", by="engine")
        == 1
    )
    assert (
        value(after, "notifyflow_steps_total", node_type="email", outcome="transient")
        - value(before, "notifyflow_steps_total", node_type="email", outcome="transient")
        == 1
    )


@pytest.mark.django_db
def test_queue_figures_show_the_due_backlog_and_the_oldest_due_age():
    workflow = WorkflowFactory()
    now = timezone.now()
    TriggerInstanceFactory(workflow=workflow, available_at=now - timedelta(seconds=120))
    TriggerInstanceFactory(workflow=workflow, available_at=now - timedelta(seconds=5))
    TriggerInstanceFactory(workflow=workflow, available_at=now + timedelta(hours=1))
    TriggerInstanceFactory(workflow=workflow, status=S.COMPLETED, available_at=now)
    samples = scrape()
    assert value(samples, "notifyflow_instances", status="enqueued") == 3
    assert value(samples, "notifyflow_instances", status="processing") == 0
    assert value(samples, "notifyflow_due_backlog") == 2
    assert 120 <= value(samples, "notifyflow_oldest_due_age_seconds") < 180
    assert value(samples, "notifyflow_queue_figures_up") == 1


@pytest.mark.django_db
def test_each_lane_reports_its_own_due_backlog_and_oldest_due_age():
    now = timezone.now()
    critical = WorkflowFactory(priority="critical")
    bulk = WorkflowFactory(priority="bulk")
    TriggerInstanceFactory(workflow=critical, available_at=now - timedelta(seconds=30))
    for seconds in (600, 60):
        TriggerInstanceFactory(workflow=bulk, available_at=now - timedelta(seconds=seconds))
    TriggerInstanceFactory(workflow=bulk, available_at=now + timedelta(hours=1))  # not due
    TriggerInstanceFactory(workflow=bulk, status=S.COMPLETED, available_at=now)
    samples = scrape()
    assert value(samples, "notifyflow_lane_due_backlog", lane="critical") == 1
    assert value(samples, "notifyflow_lane_due_backlog", lane="bulk") == 2
    assert 30 <= value(samples, "notifyflow_lane_oldest_due_age_seconds", lane="critical") < 90
    assert 600 <= value(samples, "notifyflow_lane_oldest_due_age_seconds", lane="bulk") < 660
    for lane in ("high", "normal"):  # every lane is reported, an empty one as zero
        assert samples[("notifyflow_lane_due_backlog", (("lane", lane),))] == 0
        assert samples[("notifyflow_lane_oldest_due_age_seconds", (("lane", lane),))] == 0
    assert value(samples, "notifyflow_due_backlog") == 3
    assert value(samples, "notifyflow_instances", status="enqueued") == 4
    assert 600 <= value(samples, "notifyflow_oldest_due_age_seconds") < 660


@pytest.mark.django_db
def test_readyz_reports_each_lanes_backlog():
    now = timezone.now()
    TriggerInstanceFactory(
        workflow=WorkflowFactory(priority="high"), available_at=now - timedelta(seconds=45)
    )
    lanes = Client().get("/readyz").json()["lanes"]
    assert list(lanes) == ["critical", "high", "normal", "bulk"]
    assert lanes["high"]["due_backlog"] == 1 and lanes["high"]["oldest_due_age_s"] >= 45
    assert lanes["critical"] == {"due_backlog": 0, "oldest_due_age_s": 0.0}


@pytest.mark.django_db
def test_metrics_are_loopback_only_without_a_token():
    assert Client(REMOTE_ADDR="10.1.2.3").get("/metrics").status_code == 403
    assert Client(REMOTE_ADDR="::1").get("/metrics").status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize(
    "header",
    ["HTTP_X_FORWARDED_FOR", "HTTP_FORWARDED", "HTTP_X_REAL_IP", "HTTP_X_FORWARDED_HOST"],
)
def test_without_a_token_metrics_refuse_loopback_requests_a_proxy_forwarded(header):
    # A reverse proxy on the same host: REMOTE_ADDR is loopback, the client is not.
    response = Client(REMOTE_ADDR="127.0.0.1").get("/metrics", **{header: "203.0.113.9"})
    assert response.status_code == 403
    assert "NOTIFYFLOW_METRICS_TOKEN" in response.content.decode()


@pytest.mark.django_db
def test_a_token_serves_metrics_through_a_proxy(settings):
    settings.NOTIFYFLOW_METRICS_TOKEN = "s3cret"
    proxied = Client(REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.9")
    assert proxied.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret").status_code == 200


@pytest.mark.django_db
def test_with_a_token_metrics_require_it_from_anywhere(settings):
    settings.NOTIFYFLOW_METRICS_TOKEN = "s3cret"
    remote = Client(REMOTE_ADDR="10.1.2.3")
    missing = remote.get("/metrics")
    assert missing.status_code == 401 and "Bearer" in missing["WWW-Authenticate"]
    assert Client().get("/metrics").status_code == 401  # loopback needs it too
    assert remote.get("/metrics", HTTP_AUTHORIZATION="Bearer nope").status_code == 403
    assert remote.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret").status_code == 200


@pytest.mark.django_db
def test_readyz_reports_the_backlog_and_fails_past_the_configured_age(settings):
    TriggerInstanceFactory(
        workflow=WorkflowFactory(), available_at=timezone.now() - timedelta(seconds=90)
    )
    ready = Client().get("/readyz")
    assert ready.status_code == 200
    body = ready.json()
    assert body["database"] == "ok" and body["broker"] == "ok" and body["queue"] == "ok"
    assert body["due_backlog"] == 1 and body["oldest_due_age_s"] >= 90
    settings.NOTIFYFLOW_READYZ_MAX_DUE_AGE_S = 60
    stuck = Client().get("/readyz")
    assert stuck.status_code == 503 and stuck.json()["queue"].startswith("stuck")
    assert Client().get("/healthz").status_code == 200  # liveness keeps its meaning


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_real_workers_steps_show_in_the_scrape(tmp_path, settings):
    """Multiprocess mode: the worker writes its counters to the shared directory and
    /metrics of another process (this one) includes them."""
    flush_broker()
    shared = tmp_path / "prometheus"
    shared.mkdir()
    settings.PROMETHEUS_MULTIPROC_DIR = str(shared)
    workflow = WorkflowFactory()
    with celery_worker(
        tmp_path, pool="prefork", concurrency=2, PROMETHEUS_MULTIPROC_DIR=str(shared)
    ):
        before = scrape()
        instance = trigger_create(workflow=workflow, idempotency_key="w", payload=PAYLOAD).instance
        wait_until(
            lambda: TriggerInstance.objects.filter(pk=instance.pk, status=S.COMPLETED).exists(),
            timeout=180,
            what="instance to complete",
        )
        after = scrape()
    for node_type, channel in (("email", "email"), ("sms", "sms")):
        steps = ("notifyflow_steps_total", {"node_type": node_type, "outcome": "success"})
        assert value(after, steps[0], **steps[1]) - value(before, steps[0], **steps[1]) == 1
        sends = ("notifyflow_provider_send_seconds_count", {"channel": channel, "outcome": "sent"})
        assert value(after, sends[0], **sends[1]) - value(before, sends[0], **sends[1]) == 1
    assert value(after, "notifyflow_step_duration_seconds_count", node_type="email") >= 1
    assert list(shared.glob("*.db")), "the worker wrote no metric files"


def test_a_worker_start_removes_only_this_hosts_finished_processes_files(tmp_path):
    """Safe at any time: running processes' files (this host's or, on a shared volume,
    another host's) are kept; the files of this host's finished processes go."""
    import os
    import subprocess

    from notifyflow import metrics

    finished = subprocess.Popen(["true"])
    finished.wait()
    running = os.getpid()
    names = {
        "gone": f"counter_{metrics.HOST}-{finished.pid}.db",
        "gone_default_naming": f"histogram_{finished.pid}.db",
        "running": f"counter_{metrics.HOST}-{running}.db",
        "other_host": f"counter_elsewhere-{finished.pid}.db",
    }
    for name in names.values():
        (tmp_path / name).write_bytes(b"")
    assert metrics.remove_dead_process_files(str(tmp_path)) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [names["running"], names["other_host"]]
    )


def test_metric_files_are_named_by_host_and_pid(settings):
    import os
    from pathlib import Path

    from notifyflow import metrics

    metrics.TRIGGERS.labels(outcome="created").inc(0)
    own = Path(settings.PROMETHEUS_MULTIPROC_DIR) / f"counter_{metrics.HOST}-{os.getpid()}.db"
    assert own.exists(), "this process writes its counters to a file named by host and pid"
