"""The recipient-facing in-app feed (docs/api.md#in-app-feed), called by the customer's front end
straight from a browser with a recipient token (``api.feed_auth``), never an API key.

Every feed answer carries CORS headers (any origin: the token travels in the
Authorization header, no cookie is involved), and a preflight ``OPTIONS`` is answered
without authentication. ``counts/`` is the polled one: a token check (an HMAC, kept per
process) and one read (the token's generation and the counts, two primary-key probes),
with an ``ETag`` and ``304`` for a matching ``If-None-Match``.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import ApiView, no_body, validated_body
from api.pagination import MAX_PAGE_SIZE, CursorPagination
from feed.services import FeedCounts, feed_bulk_mark, feed_counts, feed_item_mark, feed_items
from feed.tokens import feed_token_counts
from notifyflow.throttling import PerRecipientThrottle

from ..feed_auth import (
    FeedTokenAuthentication,
    IsFeedRecipient,
    request_claims,
    request_recipient,
)
from ..serializers.feed import (
    FeedBulkInputSerializer,
    FeedBulkOutputSerializer,
    FeedCountsSerializer,
    FeedFilterSerializer,
    FeedItemOutputSerializer,
    FeedPageSerializer,
)

ID_PARAMETER = OpenApiParameter("id", UUID, OpenApiParameter.PATH, description="Feed item id")
IF_NONE_MATCH = OpenApiParameter(
    "If-None-Match",
    str,
    OpenApiParameter.HEADER,
    required=False,
    description="The ETag of the counts the client has: 304 while they are current",
)
CORS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Expose-Headers": "ETag, Retry-After",
}
PREFLIGHT = {
    **CORS,
    "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
    "Access-Control-Allow-Headers": "Authorization, Content-Type, If-None-Match",
    "Access-Control-Max-Age": "86400",
}


class FeedNewestFirst(CursorPagination):
    """Served by feed_recipient_newest (and the unread/unseen partial indexes). The
    page's counts are set by the view before it answers."""

    ordering = ("-created_at", "-id")
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = MAX_PAGE_SIZE
    counts: FeedCounts

    def get_paginated_response(self, data: Any) -> Response:
        return Response(
            {
                "results": data,
                "next": self.get_next_link(),
                "unread_count": self.counts.unread_count,
                "unseen_count": self.counts.unseen_count,
            }
        )


# Base of the feed views: recipient tokens only, CORS on every answer, preflight
# without credentials, throttled per recipient (NOTIFYFLOW_FEED_RATE), not per API key
# (no key here). (A comment, not a docstring: drf-spectacular would publish it.)
class FeedView(ApiView):
    authentication_classes = [FeedTokenAuthentication]
    permission_classes = [IsFeedRecipient]
    throttle_classes = [PerRecipientThrottle]

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        if request.method == "OPTIONS":
            return  # a browser's preflight carries no credentials
        super().initial(request, *args, **kwargs)

    def validated_query(self, request: Request) -> dict[str, Any]:
        # counts/ is polled with no query string: nothing to check (the polled path
        # skips building a serializer).
        if not request.query_params and self.get_query_serializer_class() is None:
            return {}
        return super().validated_query(request)

    def options(self, request: Any, *args: Any, **kwargs: Any) -> Response:
        return Response(status=204, headers=PREFLIGHT)

    def finalize_response(
        self, request: Request, response: Response, *args: Any, **kwargs: Any
    ) -> Response:
        response = super().finalize_response(request, response, *args, **kwargs)
        for name, value in CORS.items():
            response[name] = value
        return response


class FeedListView(FeedView):
    serializer_class = FeedItemOutputSerializer
    pagination_class = FeedNewestFirst
    query_serializer_class = FeedFilterSerializer

    @extend_schema(
        parameters=[FeedFilterSerializer],
        responses=FeedPageSerializer,
        description="The recipient's feed, newest first (cursor pagination: follow "
        "`next`), with the unread and unseen counts (archived items are not counted).",
    )
    def get(self, request: Request) -> Response:
        recipient_id = request_recipient(request)
        queryset = feed_items(
            recipient_id=recipient_id,
            status=self.query.get("status", "all"),
            archived=self.query.get("archived", "exclude"),
        ).select_related("workflow")
        page = self.paginate_queryset(queryset)
        assert isinstance(self.paginator, FeedNewestFirst)
        self.paginator.counts = feed_counts(recipient_id=recipient_id)
        return self.get_paginated_response(self.get_serializer(page, many=True).data)


class FeedCountsView(FeedView):
    serializer_class = FeedCountsSerializer
    # The token's generation is checked by the counts' own read (feed_token_counts).
    checks_token_itself = True

    @extend_schema(
        parameters=[IF_NONE_MATCH],
        responses={
            200: FeedCountsSerializer,
            304: OpenApiResponse(description="Not modified: the If-None-Match ETag is current"),
        },
        description="The recipient's unread and unseen counts (archived items excluded): "
        "one indexed read, meant to be polled with If-None-Match.",
    )
    def get(self, request: Request) -> Response:
        counts = feed_token_counts(claims=request_claims(request))
        headers = {"ETag": counts.etag, "Cache-Control": "private, no-cache"}
        if _matches(request.META.get("HTTP_IF_NONE_MATCH", ""), counts.etag):
            return Response(status=304, headers=headers)
        return Response(
            {"unread_count": counts.unread_count, "unseen_count": counts.unseen_count},
            headers=headers,
        )


def _matches(if_none_match: str, etag: str) -> bool:
    """RFC 9110: a list of entity tags (weak comparison), or "*"."""
    tags = [tag.strip().removeprefix("W/") for tag in if_none_match.split(",")]
    return "*" in tags or etag in tags


class FeedItemActionView(FeedView):
    """Mark one of the recipient's items; idempotent. 404 for an id that is not theirs."""

    serializer_class = FeedItemOutputSerializer
    feed_action = ""

    @extend_schema(parameters=[ID_PARAMETER], request=None, responses=FeedItemOutputSerializer)
    def post(self, request: Request, id: UUID) -> Response:
        no_body(request)
        item = feed_item_mark(
            recipient_id=request_recipient(request),
            item_id=id,
            action=self.feed_action,
            now=timezone.now(),
        )
        return Response(FeedItemOutputSerializer(item).data)


class FeedBulkView(FeedView):
    serializer_class = FeedBulkOutputSerializer

    @extend_schema(
        request=FeedBulkInputSerializer,
        responses=FeedBulkOutputSerializer,
        description="Apply one action to the listed items of the recipient, or to all of "
        "them, in one set-based change; ids that are not theirs are ignored. Answers how "
        "many items changed and the counts after it.",
    )
    def post(self, request: Request) -> Response:
        body = validated_body(request, FeedBulkInputSerializer)
        change = feed_bulk_mark(
            recipient_id=request_recipient(request),
            action=body["action"],
            ids=body["ids"],
            now=timezone.now(),
        )
        return Response(
            {
                "changed": change.changed,
                "unread_count": change.counts.unread_count,
                "unseen_count": change.counts.unseen_count,
            }
        )
