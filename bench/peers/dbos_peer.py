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
from psycopg_pool import ConnectionPool

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
_db_url = ""
# The step-log rows go through a small pool of our own: DBOS runs workflows on a thread
# pool, and a connection per thread would hold dozens of connections on the shared server.
_pool: ConnectionPool | None = None


@DBOS.step(name="peer_node")
def peer_node(wf_id: str, node: str, enqueued: float) -> dict[str, Any]:
    started = time.time()
    output = render_and_send(node, PAYLOAD)
    assert _pool is not None
    with _pool.connection() as conn:
        conn.execute(STEPLOG_INSERT, steplog_args(wf_id, node, started, enqueued, output))
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
            # 12 (default 20): as fast here (327 vs 324 steps/s) with 17 connections per
            # process instead of 27, on a server other sessions share (max 100).
            "sys_db_pool_size": 12,
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
        global _pool
        _pool = ConnectionPool(
            args.db, min_size=1, max_size=4, kwargs={"autocommit": True}, open=True
        )
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
