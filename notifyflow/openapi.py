"""What the OpenAPI schema says beyond the serializers: how to authenticate, and the one
error shape (``notifyflow.api_errors``) on every operation that can answer it.

Registered in settings (``SPECTACULAR_SETTINGS``): the bearer scheme is found by
drf-spectacular through the authentication class's dotted path (no import of the
triggers layer here), the errors are added by the postprocessing hook.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular import openapi as spectacular_openapi
from drf_spectacular.extensions import OpenApiAuthenticationExtension

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
    "400": "Invalid input: the body, a query parameter or a JSON value (the field is named)",
    "401": "No API key, a malformed Authorization header, or an invalid or revoked key",
    "403": "The API key's scope (or its workflow list) does not allow this",
    "404": "No such object",
    "409": "The object's state does not allow this (e.g. already finished)",
    "413": "Body larger than NOTIFYFLOW_MAX_PAYLOAD_BYTES",
    "411": "A body sent without Content-Length (chunked bodies are not accepted)",
    "415": "Content-Type is not application/json",
    "429": "Too many requests for this API key (its rate, if it has one); see Retry-After",
}
# Operations whose service can refuse with ConflictError (409) or find no instance (404,
# also without an id in the path: cancel by key), by path suffix.
CONFLICT_PATH_SUFFIXES = ("/cancel/", "/retry/", "/run-now/", "}/events/")


class ApiKeyBearerScheme(OpenApiAuthenticationExtension):
    """``Authorization: Bearer <api key>`` (triggers.auth.ApiKeyAuthentication)."""

    target_class = "triggers.auth.ApiKeyAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API key from `manage.py create_api_key NAME` or the admin.",
        }


def _error_codes(path: str, method: str, operation: dict[str, Any]) -> list[str]:
    parameters = operation.get("parameters") or []
    codes = []
    if operation.get("requestBody") or any(p.get("in") == "query" for p in parameters):
        codes.append("400")
    if any(requirement for requirement in operation.get("security") or []):
        codes += ["401", "403", "429"]
    if "{" in path or (method == "post" and path.endswith(CONFLICT_PATH_SUFFIXES)):
        codes.append("404")
    if method == "post" and path.endswith(CONFLICT_PATH_SUFFIXES):
        codes.append("409")
    if operation.get("requestBody"):
        codes += ["411", "413", "415"]
    return codes


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
                operation["responses"].setdefault(
                    code,
                    {
                        "description": ERROR_DESCRIPTIONS[code],
                        "content": {"application/json": {"schema": ref}},
                    },
                )
    return result


class AutoSchema(spectacular_openapi.AutoSchema):
    """drf-spectacular's schema; importing this module registers ApiKeyBearerScheme
    before any operation is inspected."""
