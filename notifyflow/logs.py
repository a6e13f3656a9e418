"""Structured logging: a per-request / per-task context and two formatters.

Every log line of the ``notifyflow`` loggers carries the fields bound in the current
context - ``request_id`` (from the API request, passed to every task it causes),
``task_id``, ``trigger_id``, ``workflow``, ``node_id``, ``attempt`` - so one grep for a
request id or a trigger id follows an instance from its POST to its last step.
``NOTIFYFLOW_LOG_FORMAT=json`` writes one JSON object per line; ``plain`` (the default,
for ``make run``) a readable line with the fields appended as ``key=value``.

The context lives in a ``ContextVar``: per thread and per asyncio task, so concurrent
requests never see each other's fields.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from django.http import HttpRequest, HttpResponse

_context: ContextVar[dict[str, Any]] = ContextVar("notifyflow_log_context", default={})  # noqa: B039 - never mutated

REQUEST_ID_HEADER = "X-Request-ID"
# A client's own request id is kept when it looks like one (no log injection).
_REQUEST_ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def current() -> dict[str, Any]:
    """The fields bound now (a copy)."""
    return dict(_context.get())


def request_id() -> str | None:
    return _context.get().get("request_id")


@contextmanager
def bound(**fields: Any) -> Iterator[None]:
    """Bind ``fields`` (None values skipped) for the block; everything bound inside it,
    also with ``bind()``, is dropped when it ends."""
    token = _context.set({**_context.get(), **_clean(fields)})
    try:
        yield
    finally:
        _context.reset(token)


def bind(**fields: Any) -> None:
    """Add ``fields`` to the current context until the enclosing ``bound()`` ends."""
    _context.set({**_context.get(), **_clean(fields)})


def _clean(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None and v != ""}


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    return {**_context.get(), **getattr(record, "nf", {})}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, message, the context's fields, and
    exc_info as text when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            **{k: _jsonable(v) for k, v in _fields(record).items()},
        }
        if record.exc_info:
            line["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


class PlainFormatter(logging.Formatter):
    """``asctime level logger message key=value ...`` for humans (``make run``)."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        fields = _fields(record)
        if not fields:
            return text
        head, sep, tail = text.partition("\n")  # keep a traceback below the fields
        pairs = " ".join(f"{k}={v}" for k, v in fields.items())
        return f"{head} [{pairs}]{sep}{tail}"


class RoutineTaskFilter(logging.Filter):
    """Celery's lines about each run of a routine task - beat's "Sending due task", the
    worker's "received" and "succeeded" - at DEBUG rather than INFO, so a periodic job
    that runs every few seconds does not fill the log (the task logs at INFO itself when
    it found work). Attached to the ``celery.beat``, ``celery.worker.strategy`` and
    ``celery.app.trace`` loggers by ``LOGGING``; lines of other tasks, and warnings and
    errors, pass unchanged."""

    def __init__(self, tasks: Sequence[str] = ()) -> None:
        super().__init__()
        self.tasks = frozenset(tasks)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.INFO or _celery_task_name(record) not in self.tasks:
            return True
        record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


def _celery_task_name(record: logging.LogRecord) -> str | None:
    """The task a Celery log record is about: the worker's lines pass a dict with its
    ``name``; beat's "Sending due task %s (%s)" the entry's name, then the task's."""
    args = record.args
    if isinstance(args, Mapping):
        name = args.get("name")
        return name if isinstance(name, str) else None
    if isinstance(args, tuple) and len(args) == 2 and str(record.msg).startswith("Scheduler:"):
        return str(args[1])
    return None


def _jsonable(value: Any) -> Any:
    return value if isinstance(value, (str, int, float, bool)) else str(value)


class RequestIdMiddleware:
    """Give every request an id - the client's ``X-Request-ID`` when it is a sane token,
    else a new one - bind it for the request's log lines and tasks, and return it in
    the ``X-Request-ID`` response header."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        given = request.headers.get(REQUEST_ID_HEADER, "")
        rid = given if _REQUEST_ID_RE.match(given) else uuid.uuid4().hex
        with bound(request_id=rid):
            response = self.get_response(request)
        response[REQUEST_ID_HEADER] = rid
        return response
