"""The customer's webhook endpoints: create, replace, delete, rotate the secret, enable,
replay - one service each, used by the API and the console alike, each writing an
``EndpointChange`` with its actor.

What an endpoint may be:
- ``url``: http(s), the host literal (no user info), host and port allowed by
  NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS - the webhook node's policy - checked here at save and
  again by the deliverer at each send (the list may have changed since).
- ``event_types``: at least one of ``models.EVENT_TYPES``, or ``delivery.*`` for every
  delivery status.
- ``workflows``: keys of existing workflows (a misspelt key would silently receive
  nothing); empty means every workflow. Events that belong to no workflow
  (``recipient.unsubscribed``) go to every endpoint that subscribes to their type.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from notifyflow.errors import ApplicationError, ConflictError
from workflows.definition import webhook_host_allowed, webhook_url_port
from workflows.models import Workflow

from . import signing
from .models import (
    DELIVERY_FAMILY,
    EVENT_TYPES,
    EndpointChange,
    MessageStatus,
    WebhookEndpoint,
    WebhookMessage,
)
from .outbox import kick_on_commit

SUBSCRIBABLE = (*EVENT_TYPES, DELIVERY_FAMILY)
MAX_URL_LENGTH = WebhookEndpoint._meta.get_field("url").max_length or 2000
MAX_DESCRIPTION_LENGTH = WebhookEndpoint._meta.get_field("description").max_length or 200
MAX_WORKFLOWS = 100
# The fields a change compares (never the secrets).
_EDITABLE = ("url", "description", "event_types", "workflows", "is_active")


def url_check(url: str) -> None:
    """ApplicationError (field ``url``) unless ``url`` is an http(s) URL whose literal
    host and port NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS allows."""
    if not isinstance(url, str) or not url.strip():
        raise ApplicationError(field="url", code="required", message="url: required")
    if len(url) > MAX_URL_LENGTH:
        raise ApplicationError(
            field="url", code="too_long", message=f"url: at most {MAX_URL_LENGTH} characters"
        )
    if any(ord(char) <= 0x20 or ord(char) == 0x7F for char in url):
        raise ApplicationError(
            field="url",
            code="invalid_url",
            message="url: spaces and control characters are not allowed",
        )
    parts = urlsplit(url)
    try:
        port = webhook_url_port(parts.scheme, parts.port)
    except ValueError:
        raise ApplicationError(
            field="url", code="invalid_url", message="url: invalid port"
        ) from None
    if parts.scheme not in ("http", "https") or not parts.hostname or "@" in parts.netloc:
        raise ApplicationError(
            field="url",
            code="invalid_url",
            message="url: must be an http(s) URL with a host (and no user info)",
        )
    if not webhook_host_allowed(parts.hostname, port=port):
        raise ApplicationError(
            field="url",
            code="host_not_allowed",
            message=f"url: host {parts.hostname!r} port {port} is not allowed by "
            "NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS (an entry without :port allows 80 and 443)",
        )


def _event_types(value: Sequence[str]) -> list[str]:
    types = list(dict.fromkeys(value))
    if not types:
        raise ApplicationError(
            field="event_types",
            code="required",
            message="event_types: at least one event type",
        )
    for index, event_type in enumerate(types):
        if event_type not in SUBSCRIBABLE:
            raise ApplicationError(
                field=f"event_types[{index}]",
                code="unknown_event_type",
                message=f"event_types[{index}]: {event_type!r} is not one of "
                + ", ".join(SUBSCRIBABLE),
            )
    return types


def _workflows(value: Sequence[str]) -> list[str]:
    keys = list(dict.fromkeys(value))
    if len(keys) > MAX_WORKFLOWS:
        raise ApplicationError(
            field="workflows",
            code="too_long",
            message=f"workflows: at most {MAX_WORKFLOWS} workflow keys",
        )
    known = set(Workflow.objects.filter(key__in=keys).values_list("key", flat=True))
    for index, key in enumerate(keys):
        if key not in known:
            raise ApplicationError(
                field=f"workflows[{index}]",
                code="unknown_workflow",
                message=f"workflows[{index}]: no workflow with key {key!r}",
            )
    return keys


def _description(value: str) -> str:
    if len(value) > MAX_DESCRIPTION_LENGTH:
        raise ApplicationError(
            field="description",
            code="too_long",
            message=f"description: at most {MAX_DESCRIPTION_LENGTH} characters",
        )
    return value


def endpoint_fields_validate(
    *, url: str, event_types: Sequence[str], workflows: Sequence[str], description: str
) -> dict[str, Any]:
    """The fields as an endpoint stores them (duplicates dropped), or the
    ApplicationError of the first bad one (``url``, ``event_types[i]``, ``workflows[i]``,
    ``description``). For forms that show errors before saving; the services call it."""
    url_check(url)
    return {
        "url": url,
        "description": _description(description),
        "event_types": _event_types(event_types),
        "workflows": _workflows(workflows),
    }


def _change(
    endpoint: WebhookEndpoint, *, actor: str, action: str, details: dict[str, Any] | None = None
) -> None:
    EndpointChange.objects.create(
        endpoint=endpoint,
        endpoint_url=endpoint.url,
        at=timezone.now(),
        actor=actor,
        action=action,
        details=details or {},
    )


def _state(endpoint: WebhookEndpoint) -> dict[str, Any]:
    return {name: getattr(endpoint, name) for name in _EDITABLE}


def endpoint_create(
    *,
    url: str,
    event_types: Sequence[str],
    workflows: Sequence[str] = (),
    is_active: bool = True,
    description: str = "",
    actor: str,
) -> WebhookEndpoint:
    """A new endpoint with a new secret (``endpoint.secret``: show it to the caller this
    once). ApplicationError naming the field: ``url`` (``invalid_url``,
    ``host_not_allowed``), ``event_types[i]`` (``unknown_event_type``), ``workflows[i]``
    (``unknown_workflow``)."""
    endpoint = WebhookEndpoint(
        **endpoint_fields_validate(
            url=url, event_types=event_types, workflows=workflows, description=description
        ),
        is_active=is_active,
        secret=signing.secret_generate(),
    )
    with transaction.atomic():
        endpoint.save()
        _change(endpoint, actor=actor, action="created", details=_state(endpoint))
    return endpoint


def endpoint_update(
    *,
    endpoint: WebhookEndpoint,
    url: str,
    event_types: Sequence[str],
    workflows: Sequence[str] = (),
    is_active: bool = True,
    description: str = "",
    actor: str,
) -> WebhookEndpoint:
    """Replace the endpoint's editable fields (a PUT: what is left out takes its
    default). Turning a disabled endpoint active again is ``endpoint_enable``'s change
    too (its failure record is cleared). The secret is kept. Errors as ``endpoint_create``."""
    new = {
        **endpoint_fields_validate(
            url=url, event_types=event_types, workflows=workflows, description=description
        ),
        "is_active": is_active,
    }
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.select_for_update().get(pk=endpoint.pk)
        old = _state(endpoint)
        changed = {name: [old[name], value] for name, value in new.items() if old[name] != value}
        if not changed:
            return endpoint
        for name, value in new.items():
            setattr(endpoint, name, value)
        if is_active and not old["is_active"]:
            endpoint.failing_since = endpoint.disabled_at = None
            endpoint.disabled_reason = ""
        endpoint.save()
        _change(endpoint, actor=actor, action="updated", details=changed)
    return endpoint


def endpoint_delete(*, endpoint: WebhookEndpoint, actor: str) -> None:
    """Delete the endpoint and its messages; its audit trail stays (with its URL)."""
    with transaction.atomic():
        _change(endpoint, actor=actor, action="deleted")
        endpoint.delete()


def secret_rotate(*, endpoint: WebhookEndpoint, actor: str) -> WebhookEndpoint:
    """A new secret for the endpoint (``endpoint.secret``: show it this once); the one it
    replaces keeps signing next to it for NOTIFYFLOW_STATUS_WEBHOOK_ROTATION_OVERLAP_S,
    so the receiver can switch without losing a message."""
    overlap = timedelta(seconds=settings.NOTIFYFLOW_STATUS_WEBHOOK_ROTATION_OVERLAP_S)
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.select_for_update().get(pk=endpoint.pk)
        now = timezone.now()
        endpoint.previous_secret = endpoint.secret
        endpoint.previous_secret_expires_at = now + overlap
        endpoint.secret = signing.secret_generate()
        endpoint.save()
        _change(
            endpoint,
            actor=actor,
            action="secret_rotated",
            details={"previous_secret_expires_at": endpoint.previous_secret_expires_at.isoformat()},
        )
    return endpoint


def endpoint_enable(*, endpoint: WebhookEndpoint, actor: str) -> WebhookEndpoint:
    """Make the endpoint active again, clearing its failure record (``failing_since``,
    ``disabled_at``, ``disabled_reason``). Messages that failed while it was disabled
    are sent again only by a replay. Nothing is written for an endpoint already active
    and healthy."""
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.select_for_update().get(pk=endpoint.pk)
        if endpoint.is_active and endpoint.disabled_at is None:
            return endpoint
        disabled_at = endpoint.disabled_at
        details = {"disabled_at": disabled_at.isoformat() if disabled_at else None}
        endpoint.is_active = True
        endpoint.failing_since = endpoint.disabled_at = None
        endpoint.disabled_reason = ""
        endpoint.save()
        _change(endpoint, actor=actor, action="enabled", details=details)
    return endpoint


def messages_replay(
    *, endpoint: WebhookEndpoint, since: datetime, until: datetime | None = None, actor: str
) -> int:
    """Send again the endpoint's messages created at ``since`` or later (and before
    ``until``, if given), whatever their status: pending, due now, the retry schedule
    restarted, the same event ids (``webhook-id``). Returns how many. ConflictError
    ``endpoint_disabled`` for an inactive endpoint (enable it first)."""
    if not endpoint.is_active:
        raise ConflictError(
            field=None,
            code="endpoint_disabled",
            message="the endpoint is disabled: enable it, then replay",
        )
    now = timezone.now()
    # Walks webhook_message_endpoint (endpoint, created_at).
    messages = WebhookMessage.objects.filter(endpoint=endpoint, created_at__gte=since)
    if until is not None:
        messages = messages.filter(created_at__lt=until)
    with transaction.atomic():
        # A message in flight keeps its lease: its deliverer's outcome is recorded (fenced
        # on the lease) and the replay of that one message is moot - it was being sent.
        count = messages.update(
            status=MessageStatus.PENDING, attempts=0, next_attempt_at=now, delivered_at=None
        )
        _change(
            endpoint,
            actor=actor,
            action="replayed",
            details={
                "since": since.isoformat(),
                "until": until.isoformat() if until else None,
                "messages": count,
            },
        )
        if count:
            kick_on_commit()
    return count
