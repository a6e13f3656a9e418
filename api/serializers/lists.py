"""Lists (topics) and their members."""

from __future__ import annotations

from rest_framework import serializers

from api.fields import InputSerializer, StrictCharField
from recipients.models import RecipientList

from .recipients import RecipientIdsField


class ListInputSerializer(InputSerializer):
    """The body of PUT /api/v1/lists/{key}/."""

    name = StrictCharField(max_length=200, required=False, allow_blank=True, default="")


class ListOutputSerializer(serializers.ModelSerializer):
    member_count = serializers.SerializerMethodField(help_text="How many recipients it has")

    class Meta:
        model = RecipientList
        fields = ["key", "name", "member_count", "created_at", "updated_at"]

    def get_member_count(self, obj: RecipientList) -> int:
        # Annotated by the lists page (one query); counted for one list.
        count = getattr(obj, "member_count", None)
        return obj.memberships.count() if count is None else count


class MembersInputSerializer(InputSerializer):
    """The body of POST and DELETE /api/v1/lists/{key}/members/."""

    recipients = RecipientIdsField(
        help_text="Recipient ids; on POST an id not known yet is created empty, one "
        "already a member is left alone; on DELETE one not a member is ignored"
    )


class MembersAddedSerializer(serializers.Serializer):
    added = serializers.IntegerField(help_text="Memberships created")
    created = serializers.IntegerField(help_text="Recipients created (empty)")


class MembersRemovedSerializer(serializers.Serializer):
    removed = serializers.IntegerField(help_text="Memberships deleted")
