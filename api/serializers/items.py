"""Per-item outcomes shared by the bulk endpoints (`triggers/bulk/`, `recipients/bulk/`)."""

from __future__ import annotations

from rest_framework import serializers


class ItemErrorSerializer(serializers.Serializer):
    """Why one item was refused: the error shape of the single POST."""

    code = serializers.CharField()
    field = serializers.CharField(allow_null=True)
    message = serializers.CharField()
    # The API's field name; mypy sees it shadow DRF's own ``errors``.
    errors = serializers.ListField(child=serializers.DictField())  # type: ignore[assignment]
