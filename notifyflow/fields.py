"""Strict DRF input fields: JSON types are checked, never coerced (DRF's CharField would
turn ``12`` into ``"12"``), so the serializers that use them are the API's validation and
its OpenAPI schema at once."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from rest_framework import serializers
from rest_framework.fields import empty

from .errors import ApplicationError


class StrictCharField(serializers.CharField):
    """A non-blank JSON string. Missing, null, blank or not a string: ``required``
    (or ``invalid`` for an optional field given a bad value); longer than
    ``max_length``: ``too_long``."""

    default_error_messages = {
        "required": "must be a non-empty string",
        "invalid": "must be a non-empty string (or left out)",
        "too_long": "at most {max_length} characters",
    }

    def run_validation(self, data: Any = empty) -> Any:
        if data is empty:
            if self.required:
                self.fail("required")
            return super().run_validation(data)
        if data is None and not self.required:
            return None
        if not isinstance(data, str) or not data.strip():
            self.fail("required" if self.required else "invalid")
        if self.max_length is not None and len(data) > self.max_length:
            self.fail("too_long", max_length=self.max_length)
        return data


class JsonObjectField(serializers.DictField):
    """A JSON object of at most NOTIFYFLOW_MAX_PAYLOAD_BYTES serialized (413 past it)."""

    default_error_messages = {"not_an_object": "must be a JSON object"}

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("default", dict)
        super().__init__(**kwargs)

    def run_validation(self, data: Any = empty) -> Any:
        if data is empty:
            return super().run_validation(data)
        if not isinstance(data, dict):
            self.fail("not_an_object")
        size = len(json.dumps(data, separators=(",", ":")).encode())
        limit = settings.NOTIFYFLOW_MAX_PAYLOAD_BYTES
        if size > limit:
            raise ApplicationError(
                code="payload_too_large",
                field=self.field_name,
                status=413,
                message=f"{self.field_name}: {size} bytes is over the limit of {limit} bytes",
            )
        return data


class StrictBooleanField(serializers.BooleanField):
    """JSON true or false only (DRF's BooleanField also takes "yes", 1, "on")."""

    default_error_messages = {"invalid": "must be true or false"}

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid")
        return data
