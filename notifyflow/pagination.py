"""The API's page styles, all in one place.

Cursor pagination for the big, growing tables (no COUNT(*), stable under inserts);
limit/offset only for the small workflow list.
"""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import NotFound
from rest_framework.pagination import CursorPagination as DrfCursorPagination
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request

from .errors import ApplicationError

MAX_PAGE_SIZE = 500


class CursorPagination(DrfCursorPagination):
    """A cursor that does not decode is a bad parameter (400 naming ``cursor``), not a
    missing page (DRF answers 404 "Invalid cursor")."""

    def decode_cursor(self, request: Request) -> Any:
        try:
            return super().decode_cursor(request)
        except NotFound:
            raise ApplicationError(
                code="invalid_cursor",
                field=self.cursor_query_param,
                message=f"{self.cursor_query_param}: not a cursor this API returned",
            ) from None


class NewestFirst(CursorPagination):
    """Trigger instances; served by the (status, -created_at) and
    (workflow, status, -created_at) indexes."""

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
    max_limit = MAX_PAGE_SIZE
