"""What every peer step does, the same work as a NotifyFlow email/sms node with the bench's
null providers: render the node's Liquid templates against the payload, build the message
(an email is serialised to MIME bytes, as bench.backends.NullEmailBackend does), drop it,
and record one step-log row."""

from __future__ import annotations

import argparse
import json
import os
import time
import uuid
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from liquid import Environment

PAYLOAD = {"email": "ada@example.com", "name": "Ada", "phone": "+15005550006"}
EMAIL = {
    "to": "{{ payload.email }}",
    "subject": "Hello {{ payload.name }}",
    "body": "Hi {{ payload.name }}, this is step {{ trigger.attempts }}.",
}
SMS = {"to": "{{ payload.phone }}", "body": "Hi {{ payload.name }}, a text for you."}
# email -> sms -> email, as scenario 2's bench-exec workflow.
NODES = [("e1", "email", EMAIL), ("s1", "sms", SMS), ("e2", "email", EMAIL)]
NEXT = {"e1": "s1", "s1": "e2", "e2": None}
CONFIG = {node: (kind, cfg) for node, kind, cfg in NODES}

_env = Environment()
_templates = {
    (node, key): _env.from_string(text) for node, _kind, cfg in NODES for key, text in cfg.items()
}

STEPLOG_DDL = """
CREATE TABLE IF NOT EXISTS peer_steplog (
  id bigserial PRIMARY KEY,
  workflow_id text NOT NULL,
  node_id text NOT NULL,
  started_at timestamptz NOT NULL,
  finished_at timestamptz NOT NULL,
  enqueued_at double precision NOT NULL,
  output jsonb NOT NULL
);
CREATE INDEX IF NOT EXISTS peer_steplog_wf ON peer_steplog (workflow_id);
"""
STEPLOG_INSERT = (
    "INSERT INTO peer_steplog (workflow_id, node_id, started_at, finished_at, enqueued_at, "
    "output) VALUES (%s, %s, to_timestamp(%s), clock_timestamp(), %s, %s)"
)


def render_and_send(node: str, payload: dict[str, Any], attempt: int = 1) -> dict[str, Any]:
    """Render the node, hand the message to a null provider, return the step output."""
    kind, cfg = CONFIG[node]
    ctx = {"payload": payload, "trigger": {"attempts": attempt}}
    out = {key: _templates[(node, key)].render(**ctx) for key in cfg}
    if kind == "email":
        msg = EmailMessage()
        msg["Subject"] = out["subject"]
        msg["From"] = "bench@example.com"
        msg["To"] = out["to"]
        msg["Message-ID"] = f"<{uuid.uuid4()}@bench>"
        msg.set_content(out["body"])
        msg.as_bytes()
        return {"recipient": out["to"], "message_id": msg["Message-ID"]}
    return {"recipient": out["to"], "sid": f"null-{uuid.uuid4()}"}


def steplog_args(
    wf_id: str, node: str, started: float, enqueued: float, output: dict[str, Any]
) -> tuple[Any, ...]:
    return (wf_id, node, started, enqueued, json.dumps(output))


def mark_ready(tag: str) -> None:
    directory = os.environ.get("BENCH_MARKER_DIR")
    if directory:
        Path(directory, f"ready-{tag}-{os.getpid()}").write_text("{}")


def parser(doc: str | None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=doc)
    p.add_argument("command", choices=["setup", "enqueue", "worker"])
    p.add_argument("--db", required=True, help="postgresql://... of the peer's own database")
    p.add_argument("--n", type=int, default=0, help="enqueue: workflows")
    p.add_argument("--rate", type=float, default=0.0, help="enqueue: per second (0 = burst)")
    p.add_argument("--prefix", default="wf")
    p.add_argument("--name", default="w1", help="worker: executor / worker name")
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--poll", type=float, default=0.05, help="worker: queue polling, s")
    p.add_argument(
        "--delete-jobs", default="never", help="procrastinate worker: never|successful|always"
    )
    p.add_argument(
        "--no-listen", action="store_true", help="procrastinate worker: poll only, no LISTEN"
    )
    return p


def paced(n: int, rate: float) -> Any:
    """Yield 0..n-1, at ``rate`` per second if rate > 0 (open loop)."""
    t0 = time.monotonic()
    for i in range(n):
        if rate > 0:
            pause = t0 + i / rate - time.monotonic()
            if pause > 0:
                time.sleep(pause)
        yield i
