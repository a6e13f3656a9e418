"""Small pieces shared by every API view (URL-level plumbing, no business logic)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import is_valid_path
from rest_framework.generics import GenericAPIView
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.pagination import BasePagination
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import Serializer

from notifyflow.errors import ApplicationError

from .errors import error_body
from .fields import InputSerializer, QuerySerializer


def check_body_size(request: HttpRequest | Request, setting: str) -> None:
    """Refuse a body whose declared size (``Content-Length``) is over the limit the
    setting named ``setting`` holds: 413 ``payload_too_large`` naming the limit, the body
    unread. Every API view calls it before anything else (``ApiView.body_limit``)."""
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    limit = getattr(settings, setting)
    if length > limit:
        raise ApplicationError(
            code="payload_too_large",
            field="body",
            status=413,
            message=f"body: {length} bytes is over this endpoint's limit of {limit} bytes "
            f"({setting})",
        )


def json_object_body(request: Request) -> dict:
    """The request body as a JSON object, or a 4xx naming what is wrong (its size was
    checked before the view ran: ``ApiView.initial``)."""
    if not request.META.get("CONTENT_LENGTH"):
        # A chunked body's size is unknown until read: refuse it unread.
        raise ApplicationError(
            code="length_required",
            field="Content-Length",
            status=411,
            message="Content-Length: required (chunked request bodies are not accepted)",
        )
    data = request.data
    if not isinstance(data, dict):
        raise ApplicationError(
            code="not_an_object", field="body", message="body: must be a JSON object"
        )
    return data


def validated_body(request: Request, serializer_class: type[Serializer]) -> dict[str, Any]:
    """The body checked by ``serializer_class`` (400 naming the first bad field).

    A serializer class that declares ``stateless_validation = True`` (no context, no
    instance, nothing kept between calls) is validated by one shared instance: DRF
    deep-copies every declared field into each new serializer, a visible share of a POST
    (bench/RESULTS.md, round 1)."""
    if not issubclass(serializer_class, InputSerializer):
        # Every body refuses unknown fields: a programming error, caught by any test.
        raise TypeError(f"{serializer_class.__name__} must subclass api.fields.InputSerializer")
    data = json_object_body(request)
    if getattr(serializer_class, "stateless_validation", False):
        shared = _shared_serializers.get(serializer_class)
        if shared is None:
            shared = _shared_serializers[serializer_class] = serializer_class()
        return shared.run_validation(data)
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


_shared_serializers: dict[type[Serializer], Serializer] = {}


def no_body(request: Request) -> None:
    """For an operation that takes no body: a JSON object with any key in it is refused
    (``unknown_field``), as every other endpoint refuses a field it does not know."""
    data = request.data
    if not data:
        return
    if isinstance(data, dict):
        name = str(next(iter(data)))
        raise ApplicationError(
            code="unknown_field",
            field=name,
            message=f"{name}: unknown field; this operation takes no body",
        )
    raise ApplicationError(
        code="unexpected_body", field="body", message="body: this operation takes no body"
    )


# Base of every API view: the query string is validated before the handler runs.
# ``query_serializer_class`` (a ``QuerySerializer``) declares the parameters of GET; the
# paginator's own (``cursor``, ``page_size``, ``limit``, ``offset``) are allowed on GET
# when the view has one. Anything else, on any method, is a 400 ``unknown_parameter``
# naming it; the validated values are ``self.query``. (A comment, not a docstring:
# drf-spectacular would publish it as the description of every operation.)
class ApiView(GenericAPIView):
    # A list view sets its own; a view without one takes no pagination parameters.
    pagination_class: type[BasePagination] | None = None
    query_serializer_class: type[QuerySerializer] | None = None
    query: dict[str, Any]
    # The setting that holds the largest body this view takes, whatever the method
    # (docs/api.md#limits): checked before authentication, the body unread.
    body_limit: str = "NOTIFYFLOW_MAX_BODY_BYTES"

    def get_query_serializer_class(self) -> type[QuerySerializer] | None:
        if self.request.method in ("GET", "HEAD"):
            return self.query_serializer_class
        return None

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        check_body_size(request, self.body_limit)
        super().initial(request, *args, **kwargs)  # authentication, scope, throttle
        if hasattr(self, (request.method or "").lower()):  # else 405, whatever the query
            self.query = self.validated_query(request)

    def validated_query(self, request: Request) -> dict[str, Any]:
        serializer_class = self.get_query_serializer_class() or QuerySerializer
        extra: list[str] = []
        if self.paginator is not None and request.method in ("GET", "HEAD"):
            extra = [p["name"] for p in self.paginator.get_schema_operation_parameters(self)]
        serializer = serializer_class(
            data=request.query_params, context={"extra_parameters": extra}
        )
        serializer.is_valid(raise_exception=True)
        return dict(serializer.validated_data)


class ApiAppendSlashMiddleware:
    """Under ``/api/``, a path without its trailing slash is served exactly as the path
    with it, whatever the method. (Django's APPEND_SLASH answers 301, which clients
    follow as a GET: ``POST /api/v1/triggers`` would come back 200 with the list, and
    the caller would believe the trigger created.) Placed before CommonMiddleware, which
    then sees the slashed path and redirects nothing."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        path = request.path_info
        if path.startswith("/api/") and not path.endswith("/"):
            urlconf = getattr(request, "urlconf", None)
            if not is_valid_path(path, urlconf) and is_valid_path(f"{path}/", urlconf):
                request.path_info = f"{path}/"
                request.path = f"{request.path}/"
        return self.get_response(request)


class ApiPathCheck:
    """WSGI middleware around Django (``notifyflow.wsgi``): a path under ``/api/`` whose
    percent-decoded bytes are not UTF-8 (``%ED%A0%80``, an encoded surrogate; ``%C0%AF``,
    an overlong ``/``; ``%FF``) is a 400 ``invalid_path`` in the error shape. Django
    would put such bytes back as the text ``%ED%A0%80``, which a view then takes as an
    id; only the server's ``PATH_INFO``, before Django rewrites it, still tells them
    from an id written with ``%25``."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        path = environ["PATH_INFO"] if "PATH_INFO" in environ else ""
        if path.startswith("/api/") and not _utf8(path):
            body = json.dumps(
                error_body(
                    ApplicationError(
                        code="invalid_path",
                        field="path",
                        message="path: not valid UTF-8 once percent-decoded (an invalid or "
                        "overlong byte sequence, or an encoded surrogate)",
                    )
                )
            ).encode()
            headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
            start_response("400 Bad Request", headers)
            return [body]
        return self.app(environ, start_response)


def _utf8(wsgi_path: str) -> bool:
    """Whether a WSGI ``PATH_INFO`` (the percent-decoded bytes, as latin-1) is UTF-8."""
    try:
        wsgi_path.encode("iso-8859-1").decode("utf-8")
    except UnicodeEncodeError:  # not bytes as latin-1: a server that decoded it already
        return True
    except UnicodeDecodeError:
        return False
    return True


Lookup = str | Callable[[QuerySet, Any], QuerySet]


def paginated_list(view: ApiView, queryset: QuerySet, lookups: Mapping[str, Lookup]) -> Response:
    """Apply each filter of the view's validated query string (``view.query``) as
    ``queryset.filter(lookups[name]=value)`` (or ``lookups[name](queryset, value)`` when
    it is a function), and answer one page; the serializer's context has every
    validated value."""
    for name, value in view.query.items():
        lookup = lookups.get(name)
        if lookup is None:  # not a filter: an option of the representation
            continue
        if callable(lookup):
            queryset = lookup(queryset, value)
        else:
            queryset = queryset.filter(**{lookup: value})
    page = view.paginate_queryset(queryset)
    # Every validated value reaches the serializer too (``include_payload``, say).
    serializer = view.get_serializer(
        page, many=True, context={**view.get_serializer_context(), **view.query}
    )
    return view.get_paginated_response(serializer.data)


class IgnoreFormatParameter(DefaultContentNegotiation):
    """Content negotiation for views that own a ``format`` query parameter (DRF would
    read ``?format=dot`` as a renderer choice and answer 404): always the view's first
    renderer, which renders its errors; the view returns its text itself."""

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        first = next(iter(renderers))
        return first, first.media_type
