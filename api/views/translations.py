"""Message catalogues (``translations``): one per locale and namespace (a workflow key
or ``common``), read, replaced and listed. A key limited to workflows reaches only their
namespaces (and reads ``common``)."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import ApiView, validated_body
from api_keys.authentication import request_key
from notifyflow.errors import ApplicationError
from translations.locales import locale_check
from translations.models import COMMON_NAMESPACE, Catalogue
from translations.selectors import catalogue_get, catalogue_list
from translations.services import (
    NAMESPACE_PATTERN,
    catalogue_delete,
    catalogue_put,
    namespace_check,
)

from ..permissions import actor, require_workflow
from ..serializers.translations import (
    CatalogueInputSerializer,
    CatalogueListSerializer,
    CatalogueOutputSerializer,
)


class TranslationListView(ApiView):
    """Every catalogue: locale, namespace, how many keys, when it last changed."""

    serializer_class = CatalogueListSerializer

    def get(self, request: Request) -> Response:
        catalogues = catalogue_list().only("locale", "namespace", "messages", "updated_at")
        key = request_key(request)
        if key.workflows:
            catalogues = catalogues.filter(namespace__in=[*key.workflows, COMMON_NAMESPACE])
        return Response(self.get_serializer({"results": catalogues}).data)


@extend_schema(
    parameters=[
        OpenApiParameter(
            "locale",
            str,
            OpenApiParameter.PATH,
            description="A locale Babel knows (BCP 47: en, pt-BR); else 400 invalid_locale",
        ),
        OpenApiParameter(
            "namespace",
            str,
            OpenApiParameter.PATH,
            pattern=NAMESPACE_PATTERN,
            description="A workflow key, or common",
        ),
    ]
)
class TranslationDetailView(ApiView):
    """One catalogue. GET of one never written: 404 ``translation_not_found``."""

    serializer_class = CatalogueOutputSerializer

    def get_object(self) -> Catalogue:
        # Only DRF's OPTIONS metadata calls it (the handlers look up themselves): a path
        # that names no catalogue is "no object".
        try:
            return catalogue_get(
                locale=self.kwargs.get("locale", ""), namespace=self.kwargs.get("namespace", "")
            )
        except ApplicationError:
            raise Http404 from None

    def _checked(self, request: Request, locale: str, namespace: str) -> None:
        locale_check(locale)
        namespace_check(namespace)
        if namespace != COMMON_NAMESPACE or request.method != "GET":
            require_workflow(request_key(request), namespace)

    def get(self, request: Request, locale: str, namespace: str) -> Response:
        self._checked(request, locale, namespace)
        catalogue = catalogue_get(locale=locale, namespace=namespace)
        return Response(self.get_serializer(catalogue).data)

    @extend_schema(
        request=CatalogueInputSerializer,
        responses={200: CatalogueOutputSerializer, 201: CatalogueOutputSerializer},
        description="Replaces the catalogue (201: created). Sends see it within 10 s.",
    )
    def put(self, request: Request, locale: str, namespace: str) -> Response:
        self._checked(request, locale, namespace)
        data = validated_body(request, CatalogueInputSerializer)
        catalogue, created = catalogue_put(
            locale=locale,
            namespace=namespace,
            messages=data["messages"],
            actor=actor(request_key(request)),
        )
        return Response(
            self.get_serializer(catalogue).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )

    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request, locale: str, namespace: str) -> Response:
        self._checked(request, locale, namespace)
        catalogue_delete(locale=locale, namespace=namespace)
        return Response(status=status.HTTP_204_NO_CONTENT)
