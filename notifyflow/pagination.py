"""The API's page styles, all in one place.

Cursor pagination for the big, growing tables (no COUNT(*), stable under inserts);
limit/offset only for the small workflow list.
"""

from __future__ import annotations

from rest_framework.pagination import CursorPagination, LimitOffsetPagination

MAX_PAGE_SIZE = 500


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
