"""API keys: the principal of every API request (``authentication.py`` turns a Bearer
token into one). Only the SHA-256 of a key is stored."""

from __future__ import annotations

import hashlib

from django.db import models


class ApiKeyScope(models.TextChoices):
    """What a key may do: ``trigger`` creates triggers, posts events and reads
    the instances it created; ``read`` reads everything; ``admin`` also changes workflows
    and bindings and acts on instances."""

    TRIGGER = "trigger", "Trigger (create triggers, post events, read own instances)"
    READ = "read", "Read (read everything)"
    ADMIN = "admin", "Admin (everything)"


class ApiKey(models.Model):
    """An API key; only the SHA-256 of the key is stored (keys are 256-bit random)."""

    name = models.CharField(max_length=100)
    scope = models.CharField(max_length=16, choices=ApiKeyScope.choices, default=ApiKeyScope.ADMIN)
    # Workflow keys this key is limited to; empty means every workflow.
    workflows = models.JSONField(
        default=list, blank=True, help_text="Workflow keys this key may use; empty: all"
    )
    # Requests this key may make (DRF rate, "50/s"); empty: NOTIFYFLOW_THROTTLE_RATE,
    # which is empty (no throttling) by default (notifyflow/throttling.py).
    rate = models.CharField(
        max_length=32,
        blank=True,
        default="",
        help_text="Requests allowed per period, e.g. 50/s or 3000/min (over it: 429 with "
        "Retry-After); empty: not throttled unless NOTIFYFLOW_THROTTLE_RATE is set",
    )
    prefix = models.CharField(max_length=12, help_text="First characters, to recognise a key")
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        # The table it has had since it was created in the triggers app.
        db_table = "triggers_apikey"
        verbose_name = "API key"
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(scope__in=ApiKeyScope.values), name="api_key_scope_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    # DRF treats the authenticated principal as request.user.
    is_authenticated = True

    def allows_workflow(self, workflow_key: str) -> bool:
        return not self.workflows or workflow_key in self.workflows

    def may_read(self, *, workflow_key: str, created_by_key: str) -> bool:
        """Whether this key may read an instance of ``workflow_key`` created by the key
        named ``created_by_key``: for one row, the rule ``api.permissions.visible_instances``
        applies to querysets (a ``trigger`` key reads only what it created)."""
        if self.scope == ApiKeyScope.TRIGGER and created_by_key != self.name:
            return False
        return self.allows_workflow(workflow_key)

    @staticmethod
    def hash_key(raw_key: str) -> str:
        return hashlib.sha256(raw_key.encode()).hexdigest()
