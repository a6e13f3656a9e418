"""Status webhooks: the customer's endpoints and the outbox of events for them.

An event becomes one ``WebhookMessage`` per endpoint that wants it, written in the
transaction of the change it reports (``outbox.record``); the deliverer POSTs messages
after commit and records every ``WebhookAttempt``. Instances are referred to by id, not
by foreign key: this app sits below ``triggers`` (an event outlives nothing it reports,
and an instance's events are found by ``instance_id``).
"""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q

from notifyflow.ids import uuid7

# What an endpoint can subscribe to. ``delivery.*`` subscribes to every delivery status.
EVENT_TYPES = (
    "instance.completed",
    "instance.failed",
    "instance.cancelled",
    "step.skipped",
    "delivery.sent",
    "delivery.delivered",
    "delivery.opened",
    "delivery.clicked",
    "delivery.bounced",
    "delivery.failed",
    "delivery.complained",
    "recipient.unsubscribed",
    "recipient.resubscribed",
    "recipient.device_removed",
    "recipient.connection_removed",
    "batch.closed",
)
DELIVERY_FAMILY = "delivery.*"


class WebhookEndpoint(models.Model):
    """Where the customer wants status events: ``url`` (allowed by
    NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS at save and at send), the event types and optionally
    the workflow keys it wants (empty: every workflow). ``secret`` signs every message
    (Standard Webhooks, ``whsec_`` + base64); the previous one keeps signing too until
    ``previous_secret_expires_at`` after a rotation."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    url = models.URLField(max_length=2000)
    description = models.CharField(max_length=200, blank=True)
    event_types = models.JSONField(default=list)
    workflows = models.JSONField(default=list, blank=True)
    is_active = models.BooleanField(default=True)
    secret = models.CharField(max_length=100, editable=False)
    previous_secret = models.CharField(max_length=100, blank=True, editable=False)
    previous_secret_expires_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # The first failed attempt since the last success; 5 days of it disable the endpoint.
    failing_since = models.DateTimeField(null=True, blank=True)
    disabled_at = models.DateTimeField(null=True, blank=True)
    disabled_reason = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["created_at"]
        verbose_name = "webhook endpoint"

    def __str__(self) -> str:
        return self.url


class MessageStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    DELIVERED = "delivered", "Delivered"
    FAILED = "failed", "Failed"


class WebhookMessage(models.Model):
    """One event for one endpoint. ``event_id`` is the ``webhook-id`` header and the
    body's ``id``: the same for every endpoint and every retry of the event."""

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    # No index of its own: webhook_message_endpoint (endpoint, created_at) leads with it.
    endpoint = models.ForeignKey(
        WebhookEndpoint, on_delete=models.CASCADE, related_name="messages", db_index=False
    )
    event_id = models.UUIDField()
    type = models.CharField(max_length=64)
    instance_id = models.UUIDField(null=True, blank=True)
    sequence = models.PositiveIntegerField(null=True, blank=True)
    workflow_key = models.CharField(max_length=100, blank=True)
    data = models.JSONField(default=dict)
    created_at = models.DateTimeField()
    status = models.CharField(
        max_length=16, choices=MessageStatus.choices, default=MessageStatus.PENDING
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    # A deliverer holds the message until then; a killed one's messages are taken again.
    locked_until = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    last_status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["endpoint", "event_id"], name="webhook_message_unique_endpoint_event"
            ),
        ]
        indexes = [
            # The deliverer's claim: pending messages due now, oldest first.
            models.Index(
                fields=["next_attempt_at"],
                name="webhook_message_due",
                condition=Q(status="pending"),
            ),
            # Replay (an endpoint's messages since a time) and the admin's list of them.
            models.Index(fields=["endpoint", "created_at"], name="webhook_message_endpoint"),
            # An instance's events in order (API and admin), and erasure.
            models.Index(fields=["instance_id", "sequence"], name="webhook_message_instance"),
        ]

    def __str__(self) -> str:
        return f"{self.type} {self.event_id}"


class InstanceSequence(models.Model):
    """The last ``sequence`` given to an event of an instance; incremented by an upsert,
    so concurrent writers for one instance take turns on this row."""

    instance_id = models.UUIDField(primary_key=True)
    last = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.instance_id}: {self.last}"


class WebhookAttempt(models.Model):
    """One POST of a message: what came back and how long it took."""

    # No index of its own: webhook_attempt_message (message, attempted_at) leads with it.
    message = models.ForeignKey(
        WebhookMessage, on_delete=models.CASCADE, related_name="tries", db_index=False
    )
    attempted_at = models.DateTimeField()
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)
    response_excerpt = models.CharField(max_length=1000, blank=True)
    error = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["attempted_at"]
        indexes = [
            # A message's attempts in order (admin inline).
            models.Index(fields=["message", "attempted_at"], name="webhook_attempt_message"),
        ]

    def __str__(self) -> str:
        return f"{self.attempted_at:%Y-%m-%d %H:%M:%S} {self.status_code or self.error}"


class EndpointChange(models.Model):
    """The audit trail of an endpoint: created, updated, secret rotated, disabled after
    failing (actor ``system``), enabled, replayed, deleted. Kept after a delete."""

    # No index of its own: webhook_endpoint_change (endpoint, at) leads with it.
    endpoint = models.ForeignKey(
        WebhookEndpoint,
        null=True,
        on_delete=models.SET_NULL,
        related_name="changes",
        db_index=False,
    )
    endpoint_url = models.CharField(max_length=2000)
    at = models.DateTimeField()
    actor = models.CharField(max_length=200)
    action = models.CharField(max_length=32)
    details = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at"]
        indexes = [
            # An endpoint's history (admin inline).
            models.Index(fields=["endpoint", "at"], name="webhook_endpoint_change"),
        ]

    def __str__(self) -> str:
        return f"{self.action} by {self.actor}"
