"""Strict DRF input fields: JSON types are checked, never coerced (DRF's CharField would
turn ``12`` into ``"12"``), so the serializers that use them are the API's validation and
its OpenAPI schema at once."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from django.conf import settings
from django.http import QueryDict
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail, ValidationError
from rest_framework.fields import empty

from notifyflow.errors import ApplicationError
from notifyflow.text import printable_problem


class StrictCharField(serializers.CharField):
    """A non-blank JSON string (any string with ``allow_blank=True``). Missing, null
    (unless ``allow_null``), blank or not a string: ``required`` (or ``invalid`` for an
    optional field given a bad value); longer than ``max_length``: ``too_long``."""

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
        if data is None and self.allow_null:
            return None
        if not isinstance(data, str) or (not self.allow_blank and not data.strip()):
            self.fail("required" if self.required else "invalid")
        if self.max_length is not None and len(data) > self.max_length:
            self.fail("too_long", max_length=self.max_length)
        return data


class KeyField(StrictCharField):
    """An id or a key: a non-blank ``StrictCharField`` of printable text
    (``printable_problem``; the schema's ``pattern`` is KEY_PATTERN)."""

    def run_validation(self, data: Any = empty) -> Any:
        if isinstance(data, str):
            problem = printable_problem(data)
            if problem is not None:
                raise ValidationError(problem[1], code=problem[0])
        return super().run_validation(data)


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


class StrictIntegerField(serializers.IntegerField):
    """A JSON integer only (DRF's IntegerField also takes "3", 3.0 and true)."""

    default_error_messages = {"invalid": "must be an integer"}

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictSlugField(serializers.SlugField):
    """A slug that is a JSON string (DRF's SlugField also takes the number 12 as "12"),
    taken as written: a control character is refused as in any key (DRF would trim
    ``"welcome\\n"`` to ``welcome``)."""

    def run_validation(self, data: Any = empty) -> Any:
        if isinstance(data, str):
            problem = printable_problem(data)
            if problem is not None:
                raise ValidationError(problem[1], code=problem[0])
        return super().run_validation(data)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class QueryIntegerField(serializers.IntegerField):
    """An integer query parameter written as one: "12" (DRF also takes "12.0" and " 12")."""

    _DIGITS = re.compile(r"-?[0-9]+")

    def to_internal_value(self, data: Any) -> int:
        if not isinstance(data, str) or not self._DIGITS.fullmatch(data):
            self.fail("invalid")
        return super().to_internal_value(data)


class QueryBooleanField(serializers.BooleanField):
    """A boolean query parameter: ``true`` or ``false``, as the schema writes them."""

    default_error_messages = {"invalid": "must be true or false"}

    def to_internal_value(self, data: Any) -> bool:
        if isinstance(data, bool):  # DRF's own value for a parameter left out
            return data
        if data not in ("true", "false"):
            self.fail("invalid")
        return data == "true"


class StrictBooleanField(serializers.BooleanField):
    """JSON true or false only (DRF's BooleanField also takes "yes", 1, "on")."""

    default_error_messages = {"invalid": "must be true or false"}

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


# Base of every API request body (and of each item of a bulk body): a key the serializer
# does not declare is refused with ``unknown_field`` naming it, never ignored (a misspelt
# ``subject`` must not be taken as "no subjects"). The OpenAPI schema says so
# (``additionalProperties: false``, api.schema). Comments, not docstrings, here
# and below: drf-spectacular would publish them as every subclass's description.
class InputSerializer(serializers.Serializer):
    unknown_code = "unknown_field"
    unknown_noun = "field"

    def allowed_keys(self) -> Iterable[str]:
        return self.fields.keys()

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            allowed = set(self.allowed_keys())
            unknown = [key for key in data if key not in allowed]
            if unknown:
                expected = ", ".join(sorted(allowed)) or "none"
                raise ValidationError(
                    {
                        key: [
                            ErrorDetail(
                                f"unknown {self.unknown_noun}; expected one of: {expected}",
                                code=self.unknown_code,
                            )
                        ]
                        for key in unknown
                    }
                )
        return super().to_internal_value(data)


# Base of every query-string serializer. Besides the declared fields, only the names in
# ``context["extra_parameters"]`` (the list's pagination) are allowed; an unknown
# parameter is ``unknown_parameter``, a repeated one ``repeated_parameter``, and an empty
# value ``blank`` unless the field allows it (``?workflow=`` is not "every workflow").
class QuerySerializer(InputSerializer):
    unknown_code = "unknown_parameter"
    unknown_noun = "query parameter"

    def allowed_keys(self) -> Iterable[str]:
        return [*self.fields.keys(), *self.context.get("extra_parameters", ())]

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, QueryDict):
            allowed = set(self.allowed_keys())
            errors: dict[str, list[ErrorDetail]] = {}
            for name in data:
                if name not in allowed:
                    continue  # unknown: InputSerializer names it
                values = data.getlist(name)
                field = self.fields.get(name)
                if len(values) > 1:
                    errors[name] = [ErrorDetail("given more than once", code="repeated_parameter")]
                elif (
                    values == [""]
                    and field is not None
                    and not getattr(field, "allow_blank", False)
                ):
                    errors[name] = [
                        ErrorDetail("must not be empty (leave it out instead)", code="blank")
                    ]
            if errors and all(name in allowed for name in data):
                raise ValidationError(errors)
        return super().to_internal_value(data)
