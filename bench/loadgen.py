"""A bounded HTTP load generator (pure Python, no Django), run as its own process.

``python -m bench.loadgen --port P --path /api/v1/triggers/ --token T --mode new``
prints one JSON object: requests, errors, req/s and latency percentiles. Each thread
holds one ``http.client`` connection (reopened when the server closes it, as gunicorn's
sync worker does after every response). Closed loop: ``--concurrency`` requests in flight.
"""

from __future__ import annotations

import argparse
import http.client
import json
import threading
import time
from typing import Any


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile of ``values`` (0 for an empty list); q in [0, 100]."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1))))
    return ordered[rank]


def _merged(statuses: list[dict[int, int]]) -> dict[str, int]:
    """Per-thread status counts summed, keyed by the status as text (JSON)."""
    merged: dict[str, int] = {}
    for chunk in statuses:
        for code, count in chunk.items():
            merged[str(code)] = merged.get(str(code), 0) + count
    return merged


def run_load(
    *,
    host: str,
    port: int,
    path: str,
    token: str,
    workflow: str,
    mode: str,
    concurrency: int,
    duration_s: float,
    warmup_s: float,
    prefix: str,
    pool: int = 200,
    order: bool = False,
    if_none_match: str = "",
) -> dict[str, Any]:
    """Drive POSTs (mode ``new``/``repeat``) or GETs (mode ``get``: 200 and 304 are
    successes; ``if_none_match`` sent when given) for warmup + duration seconds;
    measure only the ``duration`` part."""
    start = time.perf_counter()
    measure_from = start + warmup_s
    deadline = measure_from + duration_s
    latencies: list[list[float]] = [[] for _ in range(concurrency)]
    errors = [0] * concurrency
    statuses: list[dict[int, int]] = [{} for _ in range(concurrency)]
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    get_headers = {"Authorization": f"Bearer {token}"}
    if if_none_match:
        get_headers["If-None-Match"] = if_none_match

    get = mode == "get"
    succeeded = (200, 304) if get else (200, 201)

    def body_of(n: int, i: int) -> str:
        if mode == "new":
            key = f"{prefix}-{n}-{i}"
        else:
            key = f"{prefix}-pool-{(i * concurrency + n) % pool}"
        payload: dict[str, Any] = {
            "email": f"user{i + 1}@example.com",
            "name": "Ada",
            "phone": "+15005550006",
        }
        if order:  # what an interest template like order:{{ payload.order }} reads
            payload["order"] = key
        return json.dumps({"workflow": workflow, "idempotency_key": key, "payload": payload})

    def worker(n: int) -> None:
        conn = http.client.HTTPConnection(host, port, timeout=30)
        i = 0
        lat, seen = latencies[n], statuses[n]
        while True:
            t0 = time.perf_counter()
            if t0 >= deadline:
                break
            try:
                if get:
                    conn.request("GET", path, headers=get_headers)
                else:
                    conn.request("POST", path, body_of(n, i), headers)
                resp = conn.getresponse()
                resp.read()
                code = resp.status
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = http.client.HTTPConnection(host, port, timeout=30)
                code = -1
            i += 1
            t1 = time.perf_counter()
            if t0 >= measure_from:
                seen[code] = seen.get(code, 0) + 1
                if code in succeeded:
                    lat.append(t1 - t0)
                else:
                    errors[n] += 1
        conn.close()

    threads = [threading.Thread(target=worker, args=(n,), daemon=True) for n in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=duration_s + warmup_s + 60)
    all_lat = [x for chunk in latencies for x in chunk]
    merged = _merged(statuses)
    ok = len(all_lat)
    return {
        "mode": mode,
        "concurrency": concurrency,
        "duration_s": duration_s,
        "requests": ok + sum(errors),
        "ok": ok,
        "errors": sum(errors),
        "statuses": merged,
        "rps": ok / duration_s if duration_s else 0.0,
        "p50_ms": percentile(all_lat, 50) * 1000,
        "p99_ms": percentile(all_lat, 99) * 1000,
        "mean_ms": (sum(all_lat) / ok * 1000) if ok else 0.0,
        "latencies_ms": [round(x * 1000, 3) for x in all_lat],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--path", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--workflow", required=True)
    parser.add_argument("--mode", choices=["new", "repeat", "get"], required=True)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--order", action="store_true", help="add payload.order (= the key)")
    parser.add_argument("--if-none-match", default="", help="GET mode: send this If-None-Match")
    args = parser.parse_args()
    if not args.host.startswith("127.") and args.host not in ("localhost", "::1"):
        parser.error("the load generator only targets loopback")
    result = run_load(
        host=args.host,
        port=args.port,
        path=args.path,
        token=args.token,
        workflow=args.workflow,
        mode=args.mode,
        concurrency=args.concurrency,
        duration_s=min(args.duration, 300.0),
        warmup_s=args.warmup,
        prefix=args.prefix,
        order=args.order,
        if_none_match=args.if_none_match,
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
