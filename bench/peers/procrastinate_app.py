"""The procrastinate peer's app and its one task (imported by procrastinate_peer after it
has put the database URL in BENCH_PEER_DB)."""

from __future__ import annotations

import os
import time

import procrastinate

from bench.peers.common import NEXT, PAYLOAD, STEPLOG_INSERT, render_and_send, steplog_args

app = procrastinate.App(
    connector=procrastinate.PsycopgConnector(conninfo=os.environ.get("BENCH_PEER_DB", ""))
)


@app.task(name="peer_step", queue="bench")
async def peer_step(wf_id: str, node: str, enqueued: float, attempt: int = 1) -> None:
    """One workflow step: render + null provider, defer the next step, one step-log row."""
    started = time.time()
    output = render_and_send(node, PAYLOAD, attempt)
    nxt = NEXT[node]
    if nxt is not None:
        await peer_step.defer_async(wf_id=wf_id, node=nxt, enqueued=enqueued)
    values = steplog_args(wf_id, node, started, enqueued, output)
    await app.connector.execute_query_async(  # type: ignore[attr-defined]
        STEPLOG_INSERT_NAMED, **dict(zip(("w", "n", "s", "e", "o"), values, strict=True))
    )


STEPLOG_INSERT_NAMED = (
    "INSERT INTO peer_steplog (workflow_id, node_id, started_at, finished_at, enqueued_at, "
    "output) VALUES (%(w)s, %(n)s, to_timestamp(%(s)s), clock_timestamp(), %(e)s, %(o)s)"
)
assert STEPLOG_INSERT  # the positional form, used by the DBOS peer
