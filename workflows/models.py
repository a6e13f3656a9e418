from __future__ import annotations

from typing import Any

from django.db import models


class Priority(models.TextChoices):
    """A workflow's priority lane: each is its own Celery queue, and a plain worker
    takes critical work first."""

    CRITICAL = "critical", "Critical"
    HIGH = "high", "High"
    NORMAL = "normal", "Normal"
    BULK = "bulk", "Bulk"


class Workflow(models.Model):
    key = models.SlugField(max_length=100, unique=True)
    name = models.CharField(max_length=200)
    is_active = models.BooleanField(default=True)
    # Paused: triggers and events are still accepted, but no step of its instances
    # starts (the claim checks it); resume dispatches the due ones at once.
    is_paused = models.BooleanField(default=False)
    # Critical (password resets, OTPs): sent whatever the recipient's preferences and
    # quiet hours say, and without an unsubscribe link.
    critical = models.BooleanField(default=False, db_default=False)
    # Category slugs, most significant first: preferences by category, and the scope of
    # the unsubscribe link (the first one).
    categories = models.JSONField(default=list, blank=True, db_default=[])
    # Its instances' priority lane; a list fan-out of a normal workflow runs in bulk.
    priority = models.CharField(
        max_length=8, choices=Priority.choices, default=Priority.NORMAL, db_default="normal"
    )
    # At most concurrency_limit steps of its instances execute at once, per rendered
    # concurrency_key (a Liquid template; empty: one limit for the whole workflow). Null:
    # no limit. Instances keep the key rendered when they were created.
    concurrency_limit = models.PositiveIntegerField(null=True, blank=True)
    concurrency_key = models.CharField(max_length=500, blank=True, default="", db_default="")
    # The locale its sends render in when neither the device nor the recipient names one
    # (empty: NOTIFYFLOW_DEFAULT_LOCALE); its templates' keys must be in this locale.
    default_locale = models.CharField(max_length=35, blank=True, default="", db_default="")
    # The version new trigger instances pin; every definition change adds a version.
    current_version = models.ForeignKey(
        "workflows.WorkflowVersion",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["key"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(priority__in=Priority.values), name="workflow_priority_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(concurrency_limit__isnull=True)
                | models.Q(concurrency_limit__gte=1),
                name="workflow_concurrency_limit_positive",
            ),
            models.CheckConstraint(
                condition=models.Q(concurrency_key="") | models.Q(concurrency_limit__isnull=False),
                name="workflow_concurrency_key_needs_limit",
            ),
        ]

    def __str__(self) -> str:
        return self.key

    @property
    def definition(self) -> dict[str, Any] | None:
        version = self.current_version
        return version.definition if version is not None else None

    @property
    def concurrency_key_template(self) -> str | None:
        """The concurrency key template its new instances render; None without a limit
        (their key stays null: the claim never counts them)."""
        return self.concurrency_key if self.concurrency_limit is not None else None


class WorkflowVersion(models.Model):
    """An immutable snapshot of a definition. Never updated once written."""

    # PROTECT: versions are history (instances pin them); a workflow is deactivated,
    # not deleted with its past.
    # No index of its own: the (workflow, version) unique constraint leads with it.
    workflow = models.ForeignKey(
        Workflow, on_delete=models.PROTECT, related_name="versions", db_index=False
    )
    version = models.PositiveIntegerField()
    definition = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.CharField(max_length=150, blank=True, default="")
    # Why it changed: ``sync --message``, the API's ``message``, "restored from v3".
    message = models.CharField(max_length=500, blank=True, default="")

    class Meta:
        ordering = ["workflow_id", "-version"]
        constraints = [
            models.UniqueConstraint(
                fields=["workflow", "version"], name="workflow_version_unique_number"
            ),
            models.CheckConstraint(
                condition=models.Q(version__gte=1), name="workflow_version_positive"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.workflow_id} v{self.version}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.pk is not None:
            raise ValueError("workflow versions are immutable")
        super().save(*args, **kwargs)
