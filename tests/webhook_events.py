"""Reading what the producers of status events wrote: endpoints to subscribe, and the
messages each got, in sequence order."""

from __future__ import annotations

import time
from typing import Any

import pytest

from status_webhooks.models import WebhookEndpoint, WebhookMessage
from status_webhooks.outbox import KICK_EVERY_S


def subscribe(*event_types: str, **fields: Any) -> WebhookEndpoint:
    """An active endpoint wanting ``event_types`` (nothing is delivered to it here)."""
    fields.setdefault("url", "http://127.0.0.1:9/hook")
    return WebhookEndpoint.objects.create(
        secret="whsec_dGVzdA==", event_types=list(event_types), **fields
    )


def sent_to(endpoint: WebhookEndpoint, **filters: Any) -> list[WebhookMessage]:
    """The endpoint's messages, by instance then sequence (events of no instance last,
    in the order written)."""
    return list(
        WebhookMessage.objects.filter(endpoint=endpoint, **filters).order_by(
            "instance_id", "sequence", "id"
        )
    )


def types_in_order(endpoint: WebhookEndpoint, instance_id: Any) -> list[tuple[int, str]]:
    """(sequence, type) of an instance's messages to ``endpoint``."""
    return [(m.sequence, m.type) for m in sent_to(endpoint, instance_id=instance_id)]


@pytest.fixture
def kicks(monkeypatch) -> list[float | None]:
    """Record the deliverer's kicks instead of sending them (no deliverer runs here)."""
    sent: list[float | None] = []
    monkeypatch.setattr(
        "status_webhooks.outbox.send_task_on_commit",
        lambda name, countdown=None: sent.append(countdown),
    )
    # Kicks are paced per process (at most one per KICK_EVERY_S, plus a trailing one):
    # wait out any a test before scheduled, so this test's first kick is sent. (The
    # cache of whether an endpoint exists is a ProcessCache: conftest empties it.)
    time.sleep(2 * KICK_EVERY_S)
    return sent
