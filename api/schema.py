"""What the OpenAPI schema says beyond the serializers: the one error shape
(``api.errors``) on every operation that can answer it, and what the input
serializers enforce (``AutoSchema``).

Registered in settings (``REST_FRAMEWORK``'s schema class, ``SPECTACULAR_SETTINGS``'s
postprocessing hook). The bearer scheme of the API's authentication class is described
next to that class's app, in ``api.openapi``.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.validators import RegexValidator
from drf_spectacular import openapi as spectacular_openapi
from drf_spectacular.plumbing import force_instance
from rest_framework import serializers

from notifyflow.text import KEY_PATTERN

from .fields import InputSerializer, KeyField, QuerySerializer

ERROR_COMPONENT = "Error"
_FIELD = {"type": "string", "nullable": True, "description": "the offending field, if any"}
ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Every 4xx/5xx answer of the API.",
    "properties": {
        "code": {"type": "string", "description": "stable, machine-readable"},
        "field": _FIELD,
        "message": {"type": "string", "description": "human text naming the field"},
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "field": _FIELD,
                    "code": {"type": "string"},
                    "message": {"type": "string"},
                },
                "required": ["field", "code", "message"],
            },
        },
    },
    "required": ["code", "field", "message", "errors"],
}

# status -> when it is documented, as a test over the operation (see document_errors).
ERROR_DESCRIPTIONS = {
    "400": "Invalid input: the body, a query parameter or a JSON value (the field is "
    "named); an unknown body field or query parameter is refused (`unknown_field`, "
    "`unknown_parameter`), no string anywhere in a body may hold NUL (U+0000) or a "
    "lone UTF-16 surrogate, and an id or key (in a body or the path) is printable text: no "
    "control or bidi characters; a path that is not UTF-8 is `invalid_path`",
    "401": "No API key, a malformed Authorization header, or an invalid or revoked key",
    "403": "The API key's scope (or its workflow list) does not allow this",
    "404": "No such object",
    "409": "The object's state does not allow this (e.g. already finished), its key is "
    "taken, or a limit on what exists is reached (bindings per event, devices per recipient)",
    "413": "Body larger than this operation's limit (docs/api.md#limits), or a payload "
    "larger than NOTIFYFLOW_MAX_PAYLOAD_BYTES (`payload_too_large`, naming the limit)",
    "411": "A body sent without Content-Length (chunked bodies are not accepted)",
    "415": "Content-Type is not application/json",
    "429": "Too many requests for this API key (its rate, if it has one); see Retry-After",
    "503": "The database is unavailable (`database_unavailable`); retry after Retry-After",
    "414": "Request line (path and query string) longer than the server accepts "
    "(gunicorn: 4,094 bytes); the body is the server's, not the error shape",
}
# Every string of a request can hold neither NUL nor a lone surrogate (the parser refuses
# both, 400); a required one is also not blank (whitespace only counts as blank).
NO_NUL_PATTERN = "^[^\\u0000]*$"
NON_BLANK_PATTERN = "^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$"
# Operations whose 409 is a replay refused: `idempotency_conflict`, the key's instance is
# one this API key may not read (nothing of it is in the answer).
REPLAY_CONFLICT = (
    "`idempotency_conflict`: this idempotency key belongs to an instance the API key may "
    "not read (a `trigger` key reads only what it created); nothing of that instance is "
    "in the answer. Use another key"
)
REPLAY_PATHS = ("/api/v1/triggers/",)
# Operations whose service can refuse with ConflictError (409) or find no instance (404,
# also without an id in the path: cancel by key), by path suffix.
CONFLICT_PATH_SUFFIXES = (
    "/cancel/",
    "/retry/",
    "/run-now/",
    "}/events/",
    "}/replay/",
    # A batch not open (closed, cancelled): 409 not_open; undocumented until the fuzz run
    # reached a real batch (issue 39).
    "}/flush/",
    # A version whose definition is the current one already: 409 already_current.
    "}/restore/",
)
# Saves refused by what exists: a taken key (duplicate_key), an event with the most
# bindings it may have (too_many_bindings).
CONFLICT_OPERATIONS = {
    ("post", "/api/v1/workflows/"),
    # A recipient with the most devices it may have (too_many_devices).
    ("post", "/api/v1/recipients/{id}/channel-data/push/devices/"),
    ("post", "/api/v1/workflow-triggers/"),
    ("put", "/api/v1/workflow-triggers/{id}/"),
}


def _error_codes(path: str, method: str, operation: dict[str, Any]) -> list[str]:
    # 400 everywhere: an unknown query parameter (or body field) is refused on every operation.
    codes = ["400"]
    if any(requirement for requirement in operation.get("security") or []):
        codes += ["401", "403", "429", "503"]
    if "{" in path or (method == "post" and path.endswith(CONFLICT_PATH_SUFFIXES)):
        codes.append("404")
    conflict_suffix = method == "post" and path.endswith(CONFLICT_PATH_SUFFIXES)
    replay = method == "post" and path in REPLAY_PATHS
    if conflict_suffix or replay or (method, path) in CONFLICT_OPERATIONS:
        codes.append("409")
    if operation.get("requestBody"):
        codes += ["411", "413", "415"]
    codes.append("414")
    return codes


def _one_blank_string(prop: dict[str, Any]) -> dict[str, Any]:
    """drf-spectacular writes a blank-allowed string with a maxLength as ``oneOf``
    [the string, a string of length 0]; "" matches both, which ``oneOf`` forbids, so a
    valid blank reason would be schema-invalid. A string that may be blank is one schema."""
    options = prop.get("oneOf")
    if not (isinstance(options, list) and len(options) == 2):
        return prop
    full, empty = options
    if empty == {"type": "string", "maxLength": 0} and full.get("type") == "string":
        if not full.get("minLength"):
            rest = {k: v for k, v in prop.items() if k != "oneOf"}
            return {**full, **rest}
    return prop


def document_errors(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict:
    """drf-spectacular postprocessing hook: the Error component, and a response per
    error status each operation can answer, unless the view documented it already."""
    result.setdefault("components", {}).setdefault("schemas", {})[ERROR_COMPONENT] = ERROR_SCHEMA
    ref = {"$ref": f"#/components/schemas/{ERROR_COMPONENT}"}
    for path, operations in result.get("paths", {}).items():
        for method, operation in operations.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            for code in _error_codes(path, method, operation):
                replay = code == "409" and path in REPLAY_PATHS
                description = REPLAY_CONFLICT if replay else ERROR_DESCRIPTIONS[code]
                response: dict[str, Any] = {"description": description}
                if code != "414":  # answered by the HTTP server before the app
                    response["content"] = {"application/json": {"schema": ref}}
                operation["responses"].setdefault(code, response)
    return result


class AutoSchema(spectacular_openapi.AutoSchema):
    """drf-spectacular's schema, plus what the input serializers enforce beyond DRF's
    defaults (api.fields): a request body refuses unknown fields
    (``additionalProperties: false``); a request string is never blank unless the field
    allows it, and never holds NUL; an id or key (``KeyField``) is printable text."""

    def _map_basic_serializer(self, serializer: Any, direction: str) -> dict[str, Any]:
        schema = super()._map_basic_serializer(serializer, direction)
        instance = force_instance(serializer)
        if isinstance(instance, InputSerializer) and not isinstance(instance, QuerySerializer):
            schema["additionalProperties"] = False
        for name, prop in (schema.get("properties") or {}).items():
            schema["properties"][name] = _one_blank_string(prop)
        return schema

    def get_operation(self, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        operation = super().get_operation(*args, **kwargs)
        setting = getattr(self.view, "body_limit", None)  # api.base.ApiView
        if operation is not None and operation.get("requestBody") and setting:
            limit = getattr(settings, setting)
            operation["responses"].setdefault(
                "413",
                {
                    "description": f"Body larger than {limit:,} bytes ({setting}), or a payload "
                    "larger than NOTIFYFLOW_MAX_PAYLOAD_BYTES (`payload_too_large`, naming "
                    "the limit)",
                    "content": {
                        "application/json": {
                            "schema": {"$ref": f"#/components/schemas/{ERROR_COMPONENT}"}
                        }
                    },
                },
            )
        return operation

    def _map_serializer_field(
        self, field: Any, direction: str, bypass_extensions: bool = False
    ) -> dict[str, Any]:
        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        if (
            direction == "request"
            and isinstance(field, serializers.CharField)
            and not any(isinstance(v, RegexValidator) for v in field.validators)
            and isinstance(schema, dict)
            and schema.get("type") == "string"
            and not {"format", "pattern", "enum"} & schema.keys()
        ):
            if isinstance(field, KeyField):  # an id or key: printable text, not blank
                schema["minLength"] = max(schema.get("minLength", 0), 1)
                schema["pattern"] = KEY_PATTERN
            elif getattr(field, "allow_blank", False):
                schema["pattern"] = NO_NUL_PATTERN
            else:
                schema["minLength"] = max(schema.get("minLength", 0), 1)
                schema["pattern"] = NON_BLANK_PATTERN
        return schema
