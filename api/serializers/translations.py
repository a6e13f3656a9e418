"""Bodies and answers of /api/v1/translations/."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from translations.locales import flatten, messages_check
from translations.models import Catalogue

from ..fields import InputSerializer, JsonObjectField


class MessagesField(JsonObjectField):
    """An object of strings or nested objects (400 ``invalid_messages`` naming the path of
    the first bad value), held to the payload size limit like other bodies."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", True)
        kwargs.setdefault("default", serializers.empty)
        super().__init__(**kwargs)

    def run_validation(self, data: Any = serializers.empty) -> Any:
        value = super().run_validation(data)
        return messages_check(value)


class CatalogueInputSerializer(InputSerializer):
    stateless_validation = True  # api.base.validated_body

    messages = MessagesField(
        help_text='Keys to texts; nested objects make dotted keys ({"order": {"shipped": '
        '"..."}} is order.shipped); an object of CLDR plural forms ({"one": "...", "other": '
        '"..."}) is one plural message. Replaces the whole catalogue'
    )


class CatalogueOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = Catalogue
        fields = ["locale", "namespace", "messages", "updated_at", "updated_by"]


class CatalogueSummarySerializer(serializers.ModelSerializer):
    keys = serializers.SerializerMethodField(help_text="How many messages it holds")

    class Meta:
        model = Catalogue
        fields = ["locale", "namespace", "keys", "updated_at"]

    def get_keys(self, catalogue: Catalogue) -> int:
        return len(flatten(catalogue.messages))


class CatalogueListSerializer(serializers.Serializer):
    results = CatalogueSummarySerializer(many=True)
