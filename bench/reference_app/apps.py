from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from django.apps import AppConfig


class ReferenceAppConfig(AppConfig):
    name = "bench.reference_app"
    label = "bench_reference"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from celery.signals import worker_process_shutdown, worker_ready, worker_shutdown

        worker_ready.connect(_on_worker_ready, weak=False)
        worker_shutdown.connect(_on_worker_shutdown, weak=False)
        # A prefork node's tasks run in its child (the RabbitMQ runs, bench/infra.py):
        # the child writes its own stats, under its node's pid.
        worker_process_shutdown.connect(_on_child_shutdown, weak=False)


def _marker(kind: str, sender: Any) -> Path | None:
    directory = os.environ.get("BENCH_MARKER_DIR")
    if not directory:
        return None
    hostname = getattr(sender, "hostname", None) or str(os.getpid())
    return Path(directory) / f"{kind}-{hostname}-{os.getpid()}.json"


def _on_worker_ready(sender: Any = None, **_: Any) -> None:
    path = _marker("ready", sender)
    if path is not None:
        path.write_text("{}")


def _on_worker_shutdown(sender: Any = None, **_: Any) -> None:
    from .tasks import noop_stats_json

    path = _marker("noop", sender)
    if path is not None:
        path.write_text(noop_stats_json())


def _on_child_shutdown(**_: Any) -> None:
    from .tasks import noop_stats_json

    directory = os.environ.get("BENCH_MARKER_DIR")
    if directory:
        path = Path(directory) / f"noop-child{os.getpid()}-{os.getppid()}.json"
        path.write_text(noop_stats_json())
