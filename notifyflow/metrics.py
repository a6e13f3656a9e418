"""Prometheus metrics: ``GET /metrics`` in the text format, names starting
with ``notifyflow_``, counters ending in ``_total``.

Where the figures come from, and why this way:

- **Counters and histograms** (triggers, events, steps, step duration, provider latency,
  retries, cancellations, sweeper recoveries) are incremented where they happen, in
  whichever process that is: a gunicorn worker, a Celery prefork child, beat. Each
  process keeps its values in its own memory-mapped file in ``PROMETHEUS_MULTIPROC_DIR``
  (by default ``var/prometheus``, which every process of one installation agrees on);
  ``/metrics`` sums them all, so one scrape includes the workers' figures and nothing is
  lost when a process dies or is recycled. Files are named ``<kind>_<host>-<pid>.db``,
  so processes of several hosts (containers) may share one directory without mixing
  their values; a worker's start removes the files of this host's processes that no
  longer run (``remove_dead_process_files``), so the directory does not grow with every
  restart. Workers on other hosts: give each host's processes a directory of their own
  and run a web process there for Prometheus to scrape, or share one directory (a
  volume) with the web host.
- **Queue figures** (unfinished instances by status, the due backlog, the age of the
  oldest due instance) are read from the database at scrape time, through the partial
  indexes that hold only unfinished rows: they are right whatever runs where, cost
  nothing on the hot path and survive every restart. They are injected by the view
  that serves them (``api.views.health``), so this module imports no app.

Access: loopback clients only by default - and not through a proxy: a request that
carries a proxy header (``Forwarded``, ``X-Forwarded-For``, ``X-Real-IP``, ...) is
refused, since behind a reverse proxy on the same host every public client's
``REMOTE_ADDR`` is loopback. With ``NOTIFYFLOW_METRICS_TOKEN`` set, any client that sends
``Authorization: Bearer <token>`` (401 without it, 403 for a wrong one).
"""

from __future__ import annotations

import hmac
import os
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
    values,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector

# A file name's part after its kind ("counter_"): no "_" (prometheus_client splits on it).
HOST = socket.gethostname().replace("_", "-").replace("/", "-") or "localhost"


def process_identifier() -> str:
    """Unique among the processes writing to one directory, even across hosts or
    containers whose pids overlap; changes in a forked child (prometheus_client then
    opens the child's own files)."""
    return f"{HOST}-{os.getpid()}"


# With a directory (the settings always give one), this process writes its values to
# files there and reads them back from the files, whatever prometheus_client chose when
# it was imported.
WRITES_TO_FILES = bool(settings.PROMETHEUS_MULTIPROC_DIR)
if WRITES_TO_FILES:
    values.ValueClass = values.MultiProcessValue(process_identifier)

# No ``*_created`` series: multiprocess mode has none, so both modes expose the same.
disable_created_metrics()

# This process's metrics (not prometheus_client's global registry, which would add its
# own process/platform collectors, wrong in multiprocess mode).
REGISTRY = CollectorRegistry(auto_describe=True)

TRIGGERS = Counter(
    "notifyflow_triggers",
    "Trigger requests (API and event bindings) by outcome: created or replayed",
    ["outcome"],
    registry=REGISTRY,
)
EVENTS_RECEIVED = Counter(
    "notifyflow_events_received", "Events received by POST /events/", registry=REGISTRY
)
EVENT_DELIVERIES = Counter(
    "notifyflow_event_deliveries",
    "Inbox rows written: events delivered to running instances (one per instance)",
    registry=REGISTRY,
)
STEPS = Counter(
    "notifyflow_steps",
    "Steps executed, by node type and outcome (success, transient, permanent)",
    ["node_type", "outcome"],
    registry=REGISTRY,
)
STEPS_SKIPPED = Counter(
    "notifyflow_steps_skipped",
    "Steps that succeeded without sending (skipped), by skip reason (preference_opt_out, "
    "missing_channel_data, ...)",
    ["reason"],
    registry=REGISTRY,
)
CONCURRENCY_DEFERRED = Counter(
    "notifyflow_concurrency_deferred",
    "Step messages whose claim the workflow's concurrency limit refused; each "
    "is sent again shortly, by workflow",
    ["workflow"],
    registry=REGISTRY,
)
TRANSLATION_MISSING = Counter(
    "notifyflow_translation_missing",
    "Messages a step's locale lacked (rendered in the default locale, or as the key), by "
    "the step's locale",
    ["locale"],
    registry=REGISTRY,
)
STEP_SECONDS = Histogram(
    "notifyflow_step_duration_seconds",
    "Wall time of one step, claim to recorded outcome excluded (render + send)",
    ["node_type"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    registry=REGISTRY,
)
PROVIDER_SECONDS = Histogram(
    "notifyflow_provider_send_seconds",
    "Latency of one provider call, by channel and outcome (sent, failed)",
    ["channel", "outcome"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    registry=REGISTRY,
)
PROVIDER_TARGETS = Counter(
    "notifyflow_provider_targets",
    "Push and chat sends, one per target (a device, a chat connection), by provider (fcm, "
    "apns, webpush, slack, msteams, discord) and outcome (accepted, dead, retry, failed)",
    ["provider", "outcome"],
    registry=REGISTRY,
)
PROVIDER_CONNECTIONS = Counter(
    "notifyflow_provider_connections",
    "TCP connections opened to a push or chat provider, by provider (kept alive: a few per "
    "worker process, not one per device)",
    ["provider"],
    registry=REGISTRY,
)
RETRIES = Counter(
    "notifyflow_retries",
    "Retries scheduled after a failed step, by who scheduled it: the engine (a transient "
    "failure) or the sweeper (a lost lease)",
    ["by"],
    registry=REGISTRY,
)
CANCELLED = Counter(
    "notifyflow_instances_cancelled", "Instances cancelled (API, admin)", registry=REGISTRY
)
SWEEPER = Counter(
    "notifyflow_sweeper_recoveries",
    "Sweeper recoveries: lease (a dead worker's instance), redispatch (a lost message), "
    "upcoming (a wait held in the database handed to the broker within its horizon) or "
    "status_webhooks (a deliverer pass for due webhook messages no deliverer holds); "
    "redispatch_held counts late messages not sent again because their lane's queue "
    "still holds that many (a backlog, not a loss)",
    ["kind"],
    registry=REGISTRY,
)

STATUS_WEBHOOK_ATTEMPTS = Counter(
    "notifyflow_status_webhook_attempts",
    "POSTs of status webhooks to the customer's endpoints, by outcome (delivered: 2xx; "
    "failed: anything else, a timeout or a refused connection)",
    ["outcome"],
    registry=REGISTRY,
)
STATUS_WEBHOOK_MESSAGES = Counter(
    "notifyflow_status_webhook_messages",
    "Status webhook messages finished, by status: delivered, or failed (retries spent, "
    "or the endpoint disabled)",
    ["status"],
    registry=REGISTRY,
)
STATUS_WEBHOOK_ENDPOINTS_DISABLED = Counter(
    "notifyflow_status_webhook_endpoints_disabled",
    "Webhook endpoints disabled after failing continuously for 5 days",
    registry=REGISTRY,
)


@dataclass(frozen=True)
class LaneFigures:
    """One priority lane's due backlog."""

    due_backlog: int  # its enqueued instances due now
    oldest_due_age_s: float  # 0 when nothing is due


@dataclass(frozen=True)
class QueueFigures:
    """What the database says about unfinished work, at scrape time."""

    by_status: dict[str, int]  # unfinished statuses only
    due_backlog: int  # enqueued and due now (paused workflows' instances included)
    oldest_due_age_s: float  # 0 when nothing is due
    lanes: dict[str, LaneFigures]  # every lane, most urgent first, the same figures


class QueueCollector:
    """Gauges computed at scrape time from ``figures()``; a failing database gives
    ``notifyflow_queue_figures_up 0`` instead of a failed scrape."""

    def __init__(self, figures: Callable[[], QueueFigures]) -> None:
        self.figures = figures

    def collect(self) -> Iterable[Metric]:
        up = GaugeMetricFamily(
            "notifyflow_queue_figures_up", "1 if the queue figures were read from the database"
        )
        try:
            figures = self.figures()
        except Exception:  # noqa: BLE001 - a scrape must still answer
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        instances = GaugeMetricFamily(
            "notifyflow_instances", "Unfinished trigger instances by status", labels=["status"]
        )
        for status, count in sorted(figures.by_status.items()):
            instances.add_metric([status], count)
        yield instances
        yield GaugeMetricFamily(
            "notifyflow_due_backlog",
            "Enqueued instances that are due now and not yet claimed",
            value=figures.due_backlog,
        )
        yield GaugeMetricFamily(
            "notifyflow_oldest_due_age_seconds",
            "How long the oldest due, unclaimed instance has been due (0 if none)",
            value=figures.oldest_due_age_s,
        )
        backlog = GaugeMetricFamily(
            "notifyflow_lane_due_backlog",
            "Enqueued instances due now and not yet claimed, per lane",
            labels=["lane"],
        )
        age = GaugeMetricFamily(
            "notifyflow_lane_oldest_due_age_seconds",
            "How long the lane's oldest due, unclaimed instance has been due (0 if none)",
            labels=["lane"],
        )
        for lane, lane_figures in figures.lanes.items():
            backlog.add_metric([lane], lane_figures.due_backlog)
            age.add_metric([lane], lane_figures.oldest_due_age_s)
        yield backlog
        yield age


class BacklogCollector:
    """Status webhook gauges read at scrape time from ``backlog()``: (pending messages,
    of which due now). A failing database leaves them out of the scrape."""

    def __init__(self, backlog: Callable[[], tuple[int, int]]) -> None:
        self.backlog = backlog

    def collect(self) -> Iterable[Metric]:
        try:
            pending, due = self.backlog()
        except Exception:  # noqa: BLE001 - a scrape must still answer
            return
        yield GaugeMetricFamily(
            "notifyflow_status_webhook_pending",
            "Status webhook messages waiting for delivery (first attempt or a retry)",
            value=pending,
        )
        yield GaugeMetricFamily(
            "notifyflow_status_webhook_due",
            "Pending status webhook messages due now (a growing figure: deliverers behind)",
            value=due,
        )


class _Merged:
    """Families from several sources with the same name merged (values of identical
    samples summed), so the exposition never names a family twice - e.g. when this
    process counts in memory and also reads other processes' files."""

    def __init__(self, sources: list[Any]) -> None:
        self.sources = sources

    def collect(self) -> Iterable[Metric]:
        families: dict[str, Metric] = {}
        samples: dict[str, dict[tuple, Any]] = {}
        for source in self.sources:
            for family in source.collect():
                merged = families.setdefault(
                    family.name, Metric(family.name, family.documentation, family.type)
                )
                by_key = samples.setdefault(family.name, {})
                for sample in family.samples:
                    key = (sample.name, tuple(sorted(sample.labels.items())))
                    if key in by_key and merged.type != "gauge":
                        previous = by_key[key]
                        by_key[key] = previous._replace(value=previous.value + sample.value)
                    else:
                        by_key[key] = sample
        for name, family in families.items():
            family.samples = list(samples[name].values())
            yield family


def _is_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: running
        return True
    return True


def remove_dead_process_files(directory: str | None = None) -> int:
    """Delete the metric files of this host's processes that no longer run; return how
    many. Called when a worker starts: counters of finished processes then restart from
    zero (Prometheus handles a counter reset), and the directory holds one set of files
    per live process instead of one per process ever started. Files of other hosts
    (sharing a volume) and of running processes are never touched."""
    removed = 0
    for path in Path(directory or settings.PROMETHEUS_MULTIPROC_DIR).glob("*.db"):
        _, _, ident = path.stem.partition("_")
        host, _, pid = ident.rpartition("-")
        # No host part: a file written by the default identifier (the pid alone).
        if host not in ("", HOST) or not pid.isdigit() or _is_running(int(pid)):
            continue
        path.unlink(missing_ok=True)
        removed += 1
    return removed


def _allowed(request: HttpRequest) -> HttpResponse | None:
    """None when the client may scrape; else the 401/403 answer."""
    token = settings.NOTIFYFLOW_METRICS_TOKEN
    if token:
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            response = HttpResponse("Authorization: Bearer <token> required\n", status=401)
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
            return response
        if not hmac.compare_digest(given.strip().encode(), token.encode()):
            return HttpResponse("invalid metrics token\n", status=403)
        return None
    if request.META.get("REMOTE_ADDR") not in ("127.0.0.1", "::1"):
        return HttpResponse(
            "/metrics is open to loopback clients only; set NOTIFYFLOW_METRICS_TOKEN\n",
            status=403,
        )
    if any(header in request.headers for header in PROXY_HEADERS):
        return HttpResponse(
            "/metrics without NOTIFYFLOW_METRICS_TOKEN is not served through a proxy\n",
            status=403,
        )
    return None


# Headers a reverse proxy adds: their presence means the loopback REMOTE_ADDR is the
# proxy's, not the client's (a proxy on the same host would make /metrics public).
PROXY_HEADERS = ("Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Real-IP", "Via")


def metrics_response(request: HttpRequest, *, collectors: Iterable[Any] = ()) -> HttpResponse:
    """The Prometheus text exposition: every process's counters (multiprocess mode) or
    this process's, plus ``collectors`` (the database figures)."""
    refused = _allowed(request)
    if refused is not None:
        return refused
    sources: list[Any] = []
    if settings.PROMETHEUS_MULTIPROC_DIR:
        files = CollectorRegistry()
        MultiProcessCollector(files, path=settings.PROMETHEUS_MULTIPROC_DIR)
        sources.append(files)
    if not WRITES_TO_FILES:
        sources.append(REGISTRY)
    registry = CollectorRegistry()
    registry.register(_Merged(sources))
    for collector in collectors:
        registry.register(collector)
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
