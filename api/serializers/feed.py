"""The in-app feed: items as the recipient's front end sees them, the list's
filters, the counts, a bulk action, and a minted recipient token."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from api.fields import InputSerializer, QuerySerializer
from feed.models import FeedItem
from feed.services import ACTIONS, ARCHIVED, MAX_BULK_IDS, STATUSES


class FeedItemOutputSerializer(serializers.ModelSerializer):
    recipient = serializers.CharField(source="recipient_id", read_only=True)
    workflow = serializers.CharField(source="workflow.key", read_only=True)
    instance = serializers.UUIDField(source="instance_id", read_only=True, allow_null=True)

    class Meta:
        model = FeedItem
        fields = [
            "id",
            "recipient",
            "workflow",
            "instance",
            "node_id",
            "title",
            "body",
            "url",
            "category",
            "data",
            "created_at",
            "seen_at",
            "read_at",
            "archived_at",
        ]


class FeedFilterSerializer(QuerySerializer):
    status = serializers.ChoiceField(
        choices=STATUSES, required=False, help_text="all (default), unread or unseen"
    )
    archived = serializers.ChoiceField(
        choices=ARCHIVED,
        required=False,
        help_text="exclude (default): not archived; include: all; only: archived only",
    )


class FeedCountsSerializer(serializers.Serializer):
    unread_count = serializers.IntegerField(help_text="Unread items, archived ones excluded")
    unseen_count = serializers.IntegerField(help_text="Unseen items, archived ones excluded")


class FeedPageSerializer(FeedCountsSerializer):
    """One page of the feed, newest first, with the counts."""

    results = FeedItemOutputSerializer(many=True)
    next = serializers.URLField(allow_null=True, help_text="The next (older) page, or null")


@extend_schema_field(
    {
        "oneOf": [
            {
                "type": "array",
                "items": {"type": "string", "format": "uuid"},
                "maxItems": MAX_BULK_IDS,
            },
            {"type": "string", "enum": ["all"]},
        ],
        "description": f'Item ids (at most {MAX_BULK_IDS:,}), or "all": every item of the '
        "recipient's feed",
    }
)
class FeedIdsField(serializers.Field):
    """A list of item ids (each a UUID written as a JSON string), or "all" (None)."""

    default_error_messages = {"invalid": 'expected a list of item ids or "all"'}

    def to_internal_value(self, data: Any) -> Any:
        if data == "all":
            return None
        if not isinstance(data, list):
            self.fail("invalid")
        if len(data) > MAX_BULK_IDS:
            raise serializers.ValidationError(f"at most {MAX_BULK_IDS} ids", code="too_many_ids")
        item = serializers.UUIDField()
        ids = []
        for index, value in enumerate(data):
            try:
                # DRF's UUIDField also takes the integer 12 as a UUID: an id is a string.
                if not isinstance(value, str):
                    raise serializers.ValidationError("must be an item id (a UUID string)")
                ids.append(item.run_validation(value))
            except serializers.ValidationError as exc:
                # Per index, so the error names ``ids[i]`` (api_errors._flatten).
                raise serializers.ValidationError([[]] * index + [exc.detail]) from exc
        return ids

    def to_representation(self, value: Any) -> Any:
        return "all" if value is None else [str(v) for v in value]


class FeedBulkInputSerializer(InputSerializer):
    action = serializers.ChoiceField(choices=list(ACTIONS))
    ids = FeedIdsField()


class FeedBulkOutputSerializer(FeedCountsSerializer):
    changed = serializers.IntegerField(help_text="Items the action changed")


class FeedTokenOutputSerializer(serializers.Serializer):
    token = serializers.CharField(help_text="Send it as `Authorization: Bearer <token>`")
    expires_at = serializers.DateTimeField()
