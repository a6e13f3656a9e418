"""One error shape for every 4xx/5xx answer of the API, made here and nowhere else.

{"code": "<stable code>", "field": "<first offending field or null>",
 "message": "<human text naming the field>", "errors": [{"field", "code", "message"}]}
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import DisallowedHost, PermissionDenied, RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from notifyflow.errors import ApplicationError

logger = logging.getLogger("notifyflow.api")


def _flatten(detail: Any, prefix: str = "") -> list[dict[str, Any]]:
    """Turn DRF's nested ValidationError detail into a flat list of field errors."""
    out: list[dict[str, Any]] = []
    if isinstance(detail, dict):
        for key, value in detail.items():
            name = key if not prefix else f"{prefix}.{key}"
            if key == "non_field_errors":
                name = prefix or None
            out.extend(_flatten(value, name))
    elif isinstance(detail, list):
        for index, value in enumerate(detail):
            if isinstance(value, (dict, list)):
                out.extend(_flatten(value, f"{prefix}[{index}]" if prefix else str(index)))
            else:
                out.extend(_flatten(value, prefix))
    else:
        code = getattr(detail, "code", "invalid") or "invalid"
        message = str(detail)
        if prefix and not message.startswith(prefix):
            message = f"{prefix}: {message}"
        out.append({"field": prefix or None, "code": code, "message": message})
    return out


def error_response(
    *, code: str, message: str, field: str | None, status_code: int, errors: list | None = None
) -> Response:
    body = _body(code, message, field)
    if errors is not None:
        body["errors"] = errors
    return Response(body, status=status_code)


def _form_limit_error() -> ApplicationError:
    """A body Django refused (DATA_UPLOAD_MAX_MEMORY_SIZE: the console's, the unsubscribe
    page's and the providers' webhooks' limit) as 413, never an opaque 400."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return ApplicationError(
        code="payload_too_large",
        field="body",
        status=413,
        message=f"body: over this endpoint's limit of {limit} bytes (DATA_UPLOAD_MAX_MEMORY_SIZE)",
    )


def validation_error(exc: exceptions.ValidationError) -> ApplicationError:
    """A serializer's ValidationError as the ApplicationError the API answers for it:
    the first field error's code and field, every field error in ``details``."""
    errors = _flatten(exc.detail)
    first = errors[0] if errors else {"field": None, "code": "invalid", "message": "invalid"}
    return ApplicationError(
        code=str(first["code"]),
        message=str(first["message"]),
        field=first["field"],
        details=errors,
    )


def error_body(exc: ApplicationError) -> dict[str, Any]:
    """The error shape of ``exc`` (as the body of a response, or one item's ``error``)."""
    body = _body(exc.code, exc.message, exc.field)
    body["errors"] = exc.details
    return body


# How long a client is asked to wait when the database does not answer: about the time a
# PostgreSQL restart or a failover takes.
DATABASE_RETRY_AFTER_S = 5


def exception_handler(exc: Exception, context: dict) -> Response | None:
    if isinstance(exc, RequestDataTooBig):
        exc = _form_limit_error()
    if isinstance(exc, ApplicationError):
        return Response(error_body(exc), status=exc.status)
    if isinstance(exc, (OperationalError, InterfaceError)):
        # The database is down, restarting or unreachable (or the connection died): a
        # condition to retry, not a bug - 503, never the driver's text.
        logger.error("database unavailable: %s", type(exc).__name__, exc_info=exc)
        unavailable = error_response(
            code="database_unavailable",
            message="the database is unavailable; try again later",
            field=None,
            status_code=503,
        )
        unavailable["Retry-After"] = str(DATABASE_RETRY_AFTER_S)
        return unavailable
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        return Response(error_body(validation_error(exc)), status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, exceptions.ParseError):
        return error_response(
            code="malformed_json",
            message=f"body: {exc.detail}",
            field="body",
            status_code=400,
        )
    if isinstance(exc, exceptions.UnsupportedMediaType):
        return error_response(
            code="unsupported_media_type",
            message=f"Content-Type: {exc.detail} Send application/json.",
            field="Content-Type",
            status_code=415,
        )
    if isinstance(exc, (exceptions.NotAuthenticated, exceptions.AuthenticationFailed)):
        response = error_response(
            code="not_authenticated"
            if isinstance(exc, exceptions.NotAuthenticated)
            else "authentication_failed",
            message=f"Authorization: {exc.detail}",
            field="Authorization",
            status_code=401,
        )
        response["WWW-Authenticate"] = 'Bearer realm="api"'
        return response
    code = getattr(exc, "default_code", "error")
    detail = exc.detail if isinstance(exc, exceptions.APIException) else str(exc)
    shaped = error_response(
        code=str(code), message=str(detail), field=None, status_code=response.status_code
    )
    if "Retry-After" in response:  # 429 (throttled) says when to come back
        shaped["Retry-After"] = response["Retry-After"]
    return shaped


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def server_error(request: HttpRequest) -> HttpResponse:
    """Django's 500 view (``handler500``): under ``/api/`` the error shape as JSON, never
    an HTML page; the console keeps Django's page."""
    if _is_api(request):
        return JsonResponse(
            _body("server_error", "internal server error; the failure is logged", None),
            status=500,
        )
    return defaults.server_error(request)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Django's 400 view (``handler400``), for what fails before a view runs (a ``Host``
    not in ALLOWED_HOSTS, a suspicious request): the error shape under ``/api/``. A body
    over DATA_UPLOAD_MAX_MEMORY_SIZE is a 413 naming it, everywhere (the form pages)."""
    if isinstance(exception, RequestDataTooBig):
        too_big = _form_limit_error()
        if _is_api(request):
            return JsonResponse(error_body(too_big), status=413)
        return HttpResponse(too_big.message, status=413, content_type="text/plain")
    if _is_api(request):
        if isinstance(exception, DisallowedHost):
            body = _body("disallowed_host", "Host: not a host this server answers for", "Host")
        else:
            body = _body("bad_request", "the request was refused as malformed", None)
        return JsonResponse(body, status=400)
    return defaults.bad_request(request, exception)


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Django's 404 view (``handler404``): JSON for unknown paths under ``/api/``."""
    if _is_api(request):
        return JsonResponse(
            _body("not_found", f"{request.path}: no such endpoint", None), status=404
        )
    return defaults.page_not_found(request, exception)


def _body(code: str, message: str, field: str | None) -> dict[str, Any]:
    return {
        "code": code,
        "field": field,
        "message": message,
        "errors": [{"field": field, "code": code, "message": message}],
    }
