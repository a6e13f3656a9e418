"""drf-spectacular extensions for the API's own classes, registered on import
(``ApiConfig.ready``), before any schema is built.

- ``Authorization: Bearer <api key>`` for ``api_keys.authentication.ApiKeyAuthentication``, and
  ``Bearer <recipient token>`` for the feed's ``api.feed_auth.FeedTokenAuthentication``.
- A workflow's ``definition``: the JSON Schema generated from the validator's specs
  (``workflows.definition_schema``), registered as components the first time a
  serializer's ``DefinitionField`` is described.

The rest of the schema's conventions (the error shape, strict input) are the project's
and live in ``api.schema``.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import (
    OpenApiAuthenticationExtension,
    OpenApiSerializerExtension,
    OpenApiSerializerFieldExtension,
)
from drf_spectacular.plumbing import ResolvedComponent

from api.schema import AutoSchema
from workflows.definition_schema import DEFINITION, definition_schemas


class ApiKeyBearerScheme(OpenApiAuthenticationExtension):
    """``Authorization: Bearer <api key>`` (api_keys.authentication.ApiKeyAuthentication)."""

    target_class = "api_keys.authentication.ApiKeyAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API key from `manage.py create_api_key NAME` or the admin.",
        }


class FeedTokenBearerScheme(OpenApiAuthenticationExtension):
    """``Authorization: Bearer <recipient token>`` (api.feed_auth), the feed's only."""

    target_class = "api.feed_auth.FeedTokenAuthentication"
    name = "recipientToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A recipient token from `POST /api/v1/recipients/{id}/feed-token/` "
            "(an API key is refused here).",
        }


class DefinitionFieldExtension(OpenApiSerializerFieldExtension):
    target_class = "api.serializers.workflows.DefinitionField"

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        for name, schema in definition_schemas().items():
            auto_schema.registry.register_on_missing(
                ResolvedComponent(
                    name=name, type=ResolvedComponent.SCHEMA, schema=schema, object=name
                )
            )
        return {"$ref": f"#/components/schemas/{DEFINITION}"}


class DeleteWithBodySchema(AutoSchema):
    """The schema of a view whose DELETE takes a JSON body, as its POST does
    (``DELETE /lists/{key}/members/``): drf-spectacular describes bodies of PUT, PATCH
    and POST only."""

    def _get_request_body(self, direction: str = "request") -> Any:
        if self.method != "DELETE":
            return super()._get_request_body(direction)
        self.method = "POST"
        try:
            return super()._get_request_body(direction)
        finally:
            self.method = "DELETE"


class RecipientItemsFieldExtension(OpenApiSerializerFieldExtension):
    """The ``items`` of POST /recipients/bulk/: any item is taken into the batch (one
    that is not a valid recipient is answered ``invalid`` in its result, never a 400
    for the request)."""

    target_class = "api.serializers.recipients.RecipientItemsField"

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        from .serializers.recipients import MAX_BULK_RECIPIENTS, InlineRecipientSerializer

        component = auto_schema.resolve_serializer(InlineRecipientSerializer, direction)
        return {
            "type": "array",
            "maxItems": MAX_BULK_RECIPIENTS,
            "items": {"anyOf": [component.ref, {}]},
        }


class OneOfFormsExtension(OpenApiSerializerExtension):
    """A body of one of several forms (a push device, a chat connection: told apart by
    ``provider``), which a serializer's fields cannot say: its ``schema``, a ``oneOf``
    (``api.serializers.channel_data``), and the components it refers to."""

    target_class = "api.serializers.channel_data.OneOfForms"
    match_subclasses = True

    def map_serializer(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        from .serializers.channel_data import COMPONENTS

        for name, schema in COMPONENTS.items():
            auto_schema.registry.register_on_missing(
                ResolvedComponent(
                    name=name, type=ResolvedComponent.SCHEMA, schema=schema, object=name
                )
            )
        return self.target.schema
