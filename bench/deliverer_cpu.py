"""What a delivered status webhook message costs the deliverer's process in CPU, with a
claim's POSTs sent as ``status_webhooks.delivery`` sends them (``PARALLEL_POSTS`` in
flight at once on one thread) and, as references in the same run, one after another on
one thread (issue 44's fourth round) and a thread per message (``ThreadPoolExecutor.map``,
what it did before that).

``python -m bench.deliverer_cpu [--messages 4000] [--rounds 3]``

On the bench's database (as ``bench.run`` leaves it: run that first): one endpoint on a
loopback HTTP/1.1 receiver in a child process (answers 204 on kept-alive connections,
so its CPU is not this process's), ``--messages`` messages written through the outbox,
then one ``deliver_due`` pass, timed with ``time.process_time`` (every thread of this
process: the claim, the POSTs, the record), and its wall time. The three ways alternate,
``--rounds`` times.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

RECEIVER = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()

server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def _write(messages: int) -> None:
    from status_webhooks.outbox import NewEvent, record

    for start in range(0, messages, 100):
        record(
            events=[
                NewEvent(
                    "instance.completed",
                    {"status": "completed", "workflow_key": "bench-webhooks"},
                    uuid.uuid4(),
                    "bench-webhooks",
                )
                for _ in range(min(100, messages - start))
            ]
        )


def _thread_per_message(
    shipped: Callable[[Sequence[Any]], list[Any]], size: int
) -> Callable[[Sequence[Any]], list[Any]]:
    pool = ThreadPoolExecutor(size, "bench-thread-per-message")
    return lambda messages: list(pool.map(lambda message: shipped([message])[0], messages))


def _one_after_another(
    shipped: Callable[[Sequence[Any]], list[Any]],
) -> Callable[[Sequence[Any]], list[Any]]:
    return lambda messages: [shipped([message])[0] for message in messages]


def _cost_per_message(messages: int) -> tuple[float, float]:
    """Microseconds of this process's CPU and of wall time per delivered message."""
    from status_webhooks import delivery

    _write(messages)
    started, wall = time.process_time(), time.perf_counter()
    counts = delivery.deliver_due()
    spent, wall = time.process_time() - started, time.perf_counter() - wall
    if counts.get("delivered") != messages:
        raise RuntimeError(f"delivered {counts}, expected {messages}")
    return spent / messages * 1e6, wall / messages * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=4000, help="messages per pass")
    parser.add_argument("--rounds", type=int, default=3, help="passes of each way")
    args = parser.parse_args()

    from bench.infra import bench_env

    receiver = subprocess.Popen([sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True)
    try:
        assert receiver.stdout is not None
        port = receiver.stdout.readline().strip()
        os.environ.update(bench_env(NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS=f"127.0.0.1:{port}"))
        import django

        django.setup()
        from django.conf import settings

        from status_webhooks import delivery
        from status_webhooks.models import WebhookEndpoint

        WebhookEndpoint.objects.all().delete()  # and their messages: only ours are due
        WebhookEndpoint.objects.create(
            url=f"http://127.0.0.1:{port}/hooks",
            event_types=["instance.completed"],
            secret="whsec_YmVuY2g=",
        )
        shipped = delivery.messages_send
        ways = {
            f"as shipped ({delivery.PARALLEL_POSTS} at once on one thread)": shipped,
            "one after another": _one_after_another(shipped),
            "a thread per message (reference)": _thread_per_message(
                shipped, settings.NOTIFYFLOW_STATUS_WEBHOOK_BATCH
            ),
        }
        _cost_per_message(min(args.messages, 500))  # warm: connections, statements
        figures: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
        for _ in range(args.rounds):
            for name, send_all in ways.items():
                delivery.messages_send = send_all  # type: ignore[assignment]
                figures[name].append(_cost_per_message(args.messages))
        delivery.messages_send = shipped
        batch = settings.NOTIFYFLOW_STATUS_WEBHOOK_BATCH
        for name, values in figures.items():
            cpu = [v for v, _ in values]
            print(
                f"{name}: {statistics.median(cpu):.0f} us of deliverer CPU per message"
                f" (median of {len(cpu)}: {', '.join(f'{v:.0f}' for v in cpu)}),"
                f" {statistics.median(w for _, w in values):.0f} us of wall time;"
                f" claims of {batch}"
            )
    finally:
        receiver.terminate()
        receiver.wait()


if __name__ == "__main__":
    main()
