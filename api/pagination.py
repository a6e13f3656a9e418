"""The API's page styles, all in one place.

Cursor pagination for the big, growing tables (no COUNT(*), stable under inserts);
limit/offset only for the small workflow list. Every page parameter is checked: a value
that is not a number, is out of its range (a page size over MAX_PAGE_SIZE), or a cursor
this API did not return, is a 400 naming it, never silently the first page, a smaller
page than asked for (or a 500 at the query).
"""

from __future__ import annotations

import contextlib
import re
from typing import Any

from django.core.exceptions import FieldDoesNotExist
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Field, QuerySet
from rest_framework.exceptions import NotFound
from rest_framework.pagination import Cursor, LimitOffsetPagination
from rest_framework.pagination import CursorPagination as DrfCursorPagination
from rest_framework.request import Request

from notifyflow.errors import ApplicationError

MAX_PAGE_SIZE = 500
# The OpenAPI format of a cursor: opaque, only ever copied from a `next` or `previous`
# link (tests/schemathesis_hooks.py generates real ones for the contract check).
CURSOR_FORMAT = "cursor"
_INTEGER = re.compile(r"-?[0-9]+")
# Past this an offset matches no row of any table here (and PostgreSQL's OFFSET is a bigint).
MAX_OFFSET = 10**15


def query_integer(request: Request, name: str, *, minimum: int, maximum: int, default: int) -> int:
    """The integer query parameter ``name`` (``default`` when absent): 400 ``invalid``
    naming it unless it is a plain decimal integer from ``minimum`` to ``maximum`` - never
    silently capped (the schema says both bounds)."""
    raw = request.query_params.get(name)
    if raw is None:
        return default
    out_of_range = ApplicationError(
        code="invalid",
        field=name,
        message=f"{name}: must be an integer from {minimum} to {maximum}",
    )
    if not _INTEGER.fullmatch(raw) or (raw.startswith("-") and raw.strip("-0")):
        raise out_of_range
    digits = raw.lstrip("-").lstrip("0") or "0"
    # int() refuses very long digit strings; anything that long is over the maximum.
    if len(digits) > len(str(maximum)) or not minimum <= int(digits) <= maximum:
        raise out_of_range
    return int(digits)


def _with_bounds(parameters: list[dict[str, Any]], bounds: dict[str, tuple[int, int]]) -> list:
    for parameter in parameters:
        if parameter["name"] in bounds:
            low, high = bounds[parameter["name"]]
            parameter["schema"]["minimum"], parameter["schema"]["maximum"] = low, high
    return parameters


class CursorPagination(DrfCursorPagination):
    """A cursor that does not decode, or whose position is not a value of the ordering
    column, is a bad parameter (400 ``invalid_cursor`` naming ``cursor``), not a
    missing page (DRF answers 404 "Invalid cursor") nor a 500 at the query."""

    cursor_query_description = (
        "Opaque: the cursor of this list's `next` or `previous` link, copied as is; "
        "any other value is refused (400 `invalid_cursor`)."
    )
    page_size_query_description = f"Results per page, 1 to {MAX_PAGE_SIZE}"
    _position_field: Field | None = None

    def paginate_queryset(self, queryset: Any, request: Request, view: Any = None) -> Any:
        self._position_field = None
        if isinstance(queryset, QuerySet):
            ordering = self.get_ordering(request, queryset, view)
            with contextlib.suppress(FieldDoesNotExist):
                self._position_field = queryset.model._meta.get_field(ordering[0].lstrip("-"))
        return super().paginate_queryset(queryset, request, view)

    def get_page_size(self, request: Request) -> int:
        if not self.page_size_query_param or self.page_size is None:
            return self.page_size  # type: ignore[return-value]  # always set here
        return query_integer(
            request,
            self.page_size_query_param,
            minimum=1,
            maximum=self.max_page_size or MAX_PAGE_SIZE,
            default=self.page_size,
        )

    def decode_cursor(self, request: Request) -> Cursor | None:
        try:
            cursor = super().decode_cursor(request)
            if cursor is not None and cursor.position is not None and self._position_field:
                self._position_field.to_python(cursor.position)
            return cursor
        except (NotFound, DjangoValidationError, ValueError, TypeError, OverflowError):
            raise ApplicationError(
                code="invalid_cursor",
                field=self.cursor_query_param,
                message=f"{self.cursor_query_param}: not a cursor this API returned",
            ) from None

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        size = self.page_size_query_param
        parameters = _with_bounds(
            super().get_schema_operation_parameters(view),
            {size: (1, self.max_page_size or MAX_PAGE_SIZE)} if size else {},
        )
        for parameter in parameters:
            if parameter["name"] == self.cursor_query_param:
                parameter["schema"]["format"] = CURSOR_FORMAT
        return parameters


class NewestFirst(CursorPagination):
    """Trigger instances, newest first; served by the created_at index (unfiltered,
    ?workflow= alone, ?status=enqueued), trigger_finished_status (?status= of a
    finished status), trigger_workflow_status (?workflow=&status=) and
    trigger_lease_processing (?status=processing)."""

    ordering = ("-created_at", "-id")
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = MAX_PAGE_SIZE


class StepLogsOldestFirst(CursorPagination):
    ordering = ("started_at", "id")
    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = MAX_PAGE_SIZE


class ByIdOldestFirst(CursorPagination):
    ordering = ("id",)


class WorkflowPages(LimitOffsetPagination):
    """Limit/offset; a limit or offset that is not a number is a 400 naming it."""

    max_limit = MAX_PAGE_SIZE
    limit_query_description = f"Results per page, 1 to {MAX_PAGE_SIZE}"

    def get_limit(self, request: Request) -> int | None:
        if self.limit_query_param not in request.query_params:
            return self.default_limit
        return query_integer(
            request, self.limit_query_param, minimum=1, maximum=self.max_limit, default=0
        )

    def get_offset(self, request: Request) -> int:
        return query_integer(
            request, self.offset_query_param, minimum=0, maximum=MAX_OFFSET, default=0
        )

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return _with_bounds(
            super().get_schema_operation_parameters(view),
            {self.limit_query_param: (1, self.max_limit), self.offset_query_param: (0, MAX_OFFSET)},
        )


class RecipientsById(CursorPagination):
    """Recipients (search, a list's members) by id: the primary key's index."""

    ordering = ("id",)
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = MAX_PAGE_SIZE


class ListsByKey(CursorPagination):
    ordering = ("key",)
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = MAX_PAGE_SIZE


class VersionsNewestFirst(CursorPagination):
    """A workflow's versions, newest first: the (workflow, version) unique index; a
    version added meanwhile (a save, a restore) never shifts the next page."""

    ordering = ("-version",)
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = MAX_PAGE_SIZE
