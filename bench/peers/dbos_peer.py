"""DBOS Transact peer: a workflow of three steps (email -> sms -> email), each step
rendering, sending to a null provider and writing one step-log row; workflows are enqueued
on a queue and drained by worker processes. Tuned as its docs allow: one executor_id per
process, ``worker_concurrency`` per process, fast queue polling."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
from dbos import DBOS, DBOSClient

from bench.peers.common import (
    PAYLOAD,
    STEPLOG_DDL,
    STEPLOG_INSERT,
    mark_ready,
    paced,
    parser,
    render_and_send,
    steplog_args,
)

QUEUE = "bench"
_local = threading.local()
_db_url = ""


def _conn() -> psycopg.Connection[Any]:
    conn = getattr(_local, "conn", None)
    if conn is None or conn.closed:
        conn = psycopg.connect(_db_url, autocommit=True)
        _local.conn = conn
    return conn


@DBOS.step(name="peer_node")
def peer_node(wf_id: str, node: str, enqueued: float) -> dict[str, Any]:
    started = time.time()
    output = render_and_send(node, PAYLOAD)
    _conn().execute(STEPLOG_INSERT, steplog_args(wf_id, node, started, enqueued, output))
    return output


@DBOS.workflow(name="peer_workflow")
def peer_workflow(wf_id: str, enqueued: float) -> None:
    for node in ("e1", "s1", "e2"):
        peer_node(wf_id, node, enqueued)


def _launch(args: Any) -> None:
    DBOS(
        config={
            "name": "bench-peer",
            "system_database_url": args.db,
            "executor_id": args.name,
            "application_version": "bench",
            "log_level": "WARNING",
            "sys_db_pool_size": max(20, args.concurrency + 4),
        }
    )
    DBOS.launch()
    # DBOS 3.x keeps queue settings in the system database: registered after launch.
    DBOS.register_queue(QUEUE, worker_concurrency=args.concurrency, polling_interval_sec=args.poll)


def main() -> None:
    global _db_url
    args = parser(__doc__).parse_args()
    _db_url = args.db
    if args.command == "setup":
        with psycopg.connect(args.db, autocommit=True) as conn:
            conn.execute(STEPLOG_DDL)
        _launch(args)  # creates the system schema and registers the queue
        DBOS.destroy()
    elif args.command == "enqueue":
        client = DBOSClient(system_database_url=args.db)
        options: Any = {
            "queue_name": QUEUE,
            "workflow_name": "peer_workflow",
            "app_version": "bench",
        }
        if args.rate > 0:
            for i in paced(args.n, args.rate):
                client.enqueue(options, f"{args.prefix}-{i}", time.time())
        else:  # a burst: 4 threads (one enqueue is one transaction, ~4 ms)
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(4) as pool:
                list(
                    pool.map(
                        lambda i: client.enqueue(options, f"{args.prefix}-{i}", time.time()),
                        range(args.n),
                    )
                )
        client.destroy()
    else:
        _launch(args)
        mark_ready("dbos")
        stop = threading.Event()
        import signal

        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        stop.wait()
        DBOS.destroy(workflow_completion_timeout_sec=5)


if __name__ == "__main__":
    main()
