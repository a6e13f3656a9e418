"""Scenario 41 (issue 41): what a ``push`` step costs next to an ``email`` step. Run
in-process through ``engine.step_execute`` (claim, render, the preference check, the
provider calls, record) on PostgreSQL, each to a local fake over loopback with the real
client - the fakes in a process of their own (``bench.push_fakes``), as a provider is -
in alternating chunks of the same run:

- **email**: one email node to the instance's recipient, through Django's SMTP backend
  to the SMTP fake (``tests/fake_smtp.py``: a connection per message, as Django's SMTP
  backend makes one per send);
- **push, 1 device**: one push node to the recipient's Android phone, FCM's HTTP v1
  client (google-auth's token cached, the kept-alive HTTP/1.1 client over TLS) to the FCM fake;
- **push, 3 devices**: the same node to an Android phone, an iPhone (APNs over HTTP/2
  and TLS) and a browser (Web Push: VAPID and the RFC 8291 encryption, over a kept-alive
  HTTPS connection) - three provider calls, an accepted one recorded before the next;
- **chat** (``bench.scenarios.chat``): a ``chat`` step to one Slack channel
  (``slack_sdk``'s ``chat.postMessage``) and one to a Teams incoming webhook (httpx),
  each against the chat fakes (TLS) of the same process.

Targets: a 1-device push step ≤ 1.3× an email step, a 3-device one ≤ 2× (wall medians);
the chat steps' ratios are reported without a target.
Also reported: the TLS connections the push clients opened over every step (target: per
process and provider, not per device) and the queries per step.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from bench.infra import ROOT
from bench.scenarios.chat import CHAT_GROUPS, chat_instances, chat_rows, chat_workflows
from bench.scenarios.common import Ctx, S, ms
from bench.scenarios.in_process import due_instances, timed_steps
from executions.providers import connections
from recipients.models import PushDevice, Recipient
from triggers.models import TriggerInstance
from workflows.models import Workflow
from workflows.services import workflow_save

ONE_DEVICE_TARGET = 1.3
THREE_DEVICES_TARGET = 2.0
PAYLOAD = {"order": 42, "eta": "Tuesday"}
DEFINITIONS = {
    "email": {
        "subject": "Order {{ payload.order }} shipped",
        "body": "Arriving {{ payload.eta }}. Unsubscribe: {{ unsubscribe_url }}",
    },
    "push": {
        "title": "Order {{ payload.order }} shipped",
        "body": "Arriving {{ payload.eta }}",
        "url": "https://shop.example.com/o/{{ payload.order }}",
        "data": {"order": "{{ payload.order }}"},
        "collapse_key": "order-{{ payload.order }}",
    },
}
GROUPS = ("email", "push1", "push3", *CHAT_GROUPS)
PUSH_CLIENTS = ("fcm", "apns", "webpush")
CLIENTS = (*PUSH_CLIENTS, "slack", "msteams")


def _workflow(kind: str) -> Workflow:
    key = f"bench-{kind}-vs"
    node = {"id": "send", "type": kind, "config": DEFINITIONS[kind]}
    definition = {"entry_node_id": "send", "nodes": [node], "edges": []}
    return workflow_save(key=key, name=key, definition=definition, actor="bench")


class Fakes:
    """The SMTP, FCM, APNs and Web Push fakes, in a process of their own
    (``bench.push_fakes``), and the settings that point the real clients at them."""

    def __init__(self, directory: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.push_fakes", str(directory)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        ready = json.loads(self.process.stdout.readline() or "{}")
        if "settings" not in ready:
            self.close()
            raise RuntimeError("push: the fakes' process did not start")
        os.environ["SSL_CERT_FILE"] = ready["ca"]
        self.subscription: dict[str, Any] = ready["subscription"]
        self.chat: dict[str, str] = ready["chat"]
        self.settings: dict[str, Any] = {
            **ready["settings"],
            "NOTIFYFLOW_PUBLIC_URL": settings.NOTIFYFLOW_PUBLIC_URL or "http://127.0.0.1:8000",
        }
        self.seen: dict[str, Any] = {}

    def close(self) -> None:
        """Stop the fakes; what they saw in ``seen``."""
        connections.close_all()
        try:
            out, _ = self.process.communicate(input="", timeout=30)
            self.seen = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
        except (subprocess.TimeoutExpired, ValueError):
            self.process.kill()
            self.process.wait()


def _instances(
    fakes: Fakes, flows: dict[str, Workflow], group: str, n: int, tag: str
) -> list[uuid.UUID]:
    if group in CHAT_GROUPS:
        return chat_instances(fakes.chat, flows[group], group, n, tag, PAYLOAD)
    people = [
        Recipient(id=f"{tag}-{group}-{i}", email=f"{tag}-{group}-{i}@example.com") for i in range(n)
    ]
    Recipient.objects.bulk_create(people, batch_size=1000)
    devices: list[PushDevice] = []
    for i, person in enumerate(people):
        if group == "email":
            break
        devices.append(PushDevice(recipient=person, provider="fcm", token=f"{tag}-{i}:APA91b"))
        if group == "push3":
            devices.append(PushDevice(recipient=person, provider="apns", token=f"{i:064x}"))
            # Every person's browser is one subscription of the fake (it decrypts each).
            sub = fakes.subscription
            devices.append(
                PushDevice(
                    recipient=person, provider="webpush", token=sub["endpoint"], keys=sub["keys"]
                )
            )
    PushDevice.objects.bulk_create(devices, batch_size=1000)
    flow = flows["email" if group == "email" else "push"]
    return due_instances(flow, people, key_prefix=f"{tag}-{group}", node_id="send", payload=PAYLOAD)


def _measure(ctx: Ctx, fakes: Fakes, flows: dict[str, Workflow]) -> dict[str, Any]:
    rounds, per_round = (2, 60) if ctx.quick else (4, 250)
    tag = uuid.uuid4().hex[:6]
    for group in GROUPS:  # warm-up: clients built, tokens fetched, statements prepared
        timed_steps(_instances(fakes, flows, group, 10, f"{tag}-warm"))
    queries = {}
    for group in GROUPS:
        with CaptureQueriesContext(connection) as captured:
            timed_steps(_instances(fakes, flows, group, 10, f"{tag}-q"))
        queries[group] = len(captured.captured_queries) / 10
    opened_before = {p: connections.connections_opened(p) for p in CLIENTS}
    wall: dict[str, list[float]] = {g: [] for g in GROUPS}
    cpu: dict[str, list[float]] = {g: [] for g in GROUPS}
    chunk = 25
    for r in range(rounds):
        ids = {g: _instances(fakes, flows, g, per_round, f"{tag}-r{r}") for g in GROUPS}
        for start in range(0, per_round, chunk):
            turn = start // chunk + r
            for group in GROUPS if turn % 2 == 0 else reversed(GROUPS):
                w, c = timed_steps(ids[group][start : start + chunk])
                wall[group] += w
                cpu[group] += c
    measured = TriggerInstance.objects.filter(workflow__in=flows.values())
    unfinished = measured.exclude(status=S.COMPLETED).count()
    if unfinished:
        raise RuntimeError(f"push: {unfinished} instances did not complete")
    opened = {p: connections.connections_opened(p) - n for p, n in opened_before.items()}
    return {
        "steps_per_group": rounds * per_round,
        "wall_median_s": {g: statistics.median(t) for g, t in wall.items()},
        "cpu_median_s": {g: statistics.median(t) for g, t in cpu.items()},
        "queries_per_step": queries,
        "connections_opened_while_measured": opened,
        "connections_opened_total": {p: connections.connections_opened(p) for p in CLIENTS},
    }


def scenario_push(ctx: Ctx) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-push-") as directory:
        fakes = Fakes(Path(directory))
        try:
            with override_settings(**fakes.settings):
                flows = {kind: _workflow(kind) for kind in DEFINITIONS} | chat_workflows()
                result = _measure(ctx, fakes, flows)
        finally:
            fakes.close()
    result["fakes_saw"] = fakes.seen
    wall, cpu = result["wall_median_s"], result["cpu_median_s"]
    one, three = wall["push1"] / wall["email"], wall["push3"] / wall["email"]
    result["ratio_push1_to_email"], result["ratio_push3_to_email"] = one, three
    ctx.results["push"] = result
    steps = result["steps_per_group"]
    opened, total = (
        {p: result[key][p] for p in PUSH_CLIENTS}
        for key in ("connections_opened_while_measured", "connections_opened_total")
    )
    ctx.row(
        "41 push",
        "push step, 1 device (FCM), wall median",
        ms(wall["push1"]),
        f"email step (SMTP fake) {ms(wall['email'])}, same run",
        "<= 1.3x",
        f"{one:.2f}x",
    )
    ctx.row(
        "41 push",
        "push step, 3 devices (FCM + APNs + Web Push), wall median",
        ms(wall["push3"]),
        f"email step {ms(wall['email'])}",
        "<= 2x",
        f"{three:.2f}x",
    )
    ctx.row(
        "41 push",
        "CPU median email / push1 / push3",
        f"{ms(cpu['email'])} / {ms(cpu['push1'])} / {ms(cpu['push3'])}",
        "queries/step " + ", ".join(f"{g} {result['queries_per_step'][g]:.1f}" for g in GROUPS[:3]),
    )
    ctx.row(
        "41 push",
        f"TLS connections opened over {steps} + {steps} push steps ({steps * 4} sends)",
        ", ".join(f"{p} {n}" for p, n in opened.items()),
        "in all, with the warm-up: " + ", ".join(f"{p} {n}" for p, n in total.items()),
        "per process",
        f"the fakes accepted (TLS): {fakes.seen.get('tls_connections')}; SMTP "
        f"connections {fakes.seen.get('smtp_connections')} (one per email)",
    )
    chat_rows(ctx, result, fakes.seen)
    ctx.target(
        "push: 1-device push step <= 1.3x email step",
        f"{one:.2f}x",
        "<= 1.3x",
        ok=one <= ONE_DEVICE_TARGET,
        note=f"wall median of {steps} steps each, in-process, loopback fakes",
    )
    ctx.target(
        "push: 3-device push step <= 2x email step",
        f"{three:.2f}x",
        "<= 2x",
        ok=three <= THREE_DEVICES_TARGET,
        note=f"TLS connections opened while measured: {opened}",
    )
