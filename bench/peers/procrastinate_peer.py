"""procrastinate peer: one job per step, each job defers the next and writes one step-log
row. Tuned as its docs allow: async tasks, ``concurrency`` per worker process,
``delete_jobs`` and LISTEN/NOTIFY as given (the bench: "successful", off with 0.05 s
polling; see bench/peers/runner.py), 2 worker processes."""

from __future__ import annotations

import asyncio
import os
import time

from bench.peers.common import STEPLOG_DDL, mark_ready, paced, parser


def main() -> None:
    args = parser(__doc__).parse_args()
    os.environ["BENCH_PEER_DB"] = args.db
    from bench.peers.procrastinate_app import app, peer_step

    if args.command == "setup":
        with app.open():
            app.schema_manager.apply_schema()
            app.connector.get_sync_connector().execute_query(STEPLOG_DDL)
    elif args.command == "enqueue":
        with app.open():
            if args.rate <= 0:
                jobs = [
                    {"wf_id": f"{args.prefix}-{i}", "node": "e1", "enqueued": time.time()}
                    for i in range(args.n)
                ]
                for start in range(0, len(jobs), 1000):
                    peer_step.batch_defer(*jobs[start : start + 1000])
            else:
                for i in paced(args.n, args.rate):
                    peer_step.defer(wf_id=f"{args.prefix}-{i}", node="e1", enqueued=time.time())
    else:

        async def run() -> None:
            async with app.open_async():
                mark_ready("procrastinate")
                await app.run_worker_async(
                    queues=["bench"],
                    concurrency=args.concurrency,
                    name=args.name,
                    fetch_job_polling_interval=max(args.poll, 0.05),
                    listen_notify=not args.no_listen,
                    delete_jobs=args.delete_jobs,
                )

        asyncio.run(run())


if __name__ == "__main__":
    main()
