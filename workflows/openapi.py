"""The OpenAPI description of a workflow's ``definition``: the JSON Schema generated from
the validator's specs (``definition_schema``), registered as components the first time a
serializer's ``DefinitionField`` is described. Imported by ``serializers`` so that
drf-spectacular knows the extension before it inspects any view."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.plumbing import ResolvedComponent

from .definition_schema import DEFINITION, definition_schemas


class DefinitionFieldExtension(OpenApiSerializerFieldExtension):
    target_class = "workflows.serializers.DefinitionField"

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        for name, schema in definition_schemas().items():
            auto_schema.registry.register_on_missing(
                ResolvedComponent(
                    name=name, type=ResolvedComponent.SCHEMA, schema=schema, object=name
                )
            )
        return {"$ref": f"#/components/schemas/{DEFINITION}"}
