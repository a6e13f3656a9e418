"""People a workflow notifies (SPEC §12): recipients, their preferences, lists
(topics) and memberships, and the audit of every opt-out."""

from __future__ import annotations

import secrets

from django.db import models
from django.db.models.functions import Lower


def new_token_generation() -> int:
    """A recipient's first feed-token generation: random and never 0 (the generation of
    the rows that existed before generations, and of the tokens minted then), so a
    recipient created again under an erased one's id inherits none of its tokens."""
    return secrets.randbits(62) + 1


class Recipient(models.Model):
    """A person, under the caller's own id. Addresses and settings are read when a step
    runs, so a changed address is used by the next send."""

    id = models.CharField(primary_key=True, max_length=255)
    email = models.EmailField(max_length=320, null=True, blank=True)
    # E.164 (+15551234567), validated at the edges.
    phone = models.CharField(max_length=16, null=True, blank=True)
    # An IANA time zone name (zoneinfo), validated at the edges.
    timezone = models.CharField(max_length=64, null=True, blank=True)
    locale = models.CharField(max_length=35, null=True, blank=True)
    properties = models.JSONField(default=dict, blank=True)
    # {channels, categories, workflows, quiet_hours}: recipients.preferences reads it.
    preferences = models.JSONField(default=dict, blank=True)
    # The generation of its feed tokens (executions.feed_tokens): a token carries the one
    # it was minted under and is refused once this changes (revoked on demand).
    feed_token_generation = models.BigIntegerField(default=new_token_generation, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        indexes = [
            # ?search= and the admin's search by email: case-insensitive, exact or prefix.
            models.Index(
                Lower("email"),
                name="recipient_email_lower",
                condition=models.Q(email__isnull=False),
            ),
            # ?search= and the admin's search by phone (stored normalized, E.164).
            models.Index(
                fields=["phone"], name="recipient_phone", condition=models.Q(phone__isnull=False)
            ),
        ]

    def __str__(self) -> str:
        return self.id


class RecipientList(models.Model):
    """A list (topic): recipients triggered together with ``{list: key}``."""

    key = models.SlugField(max_length=100, unique=True)
    name = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["key"]
        verbose_name = "list"

    def __str__(self) -> str:
        return self.key


class ListMembership(models.Model):
    # No index of its own: list_membership_unique leads with it (members pages, fan-out).
    list = models.ForeignKey(
        RecipientList, on_delete=models.CASCADE, related_name="memberships", db_index=False
    )
    # Indexed: a recipient's lists (admin inline, erasure).
    recipient = models.ForeignKey(Recipient, on_delete=models.CASCADE, related_name="memberships")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["list_id", "recipient_id"]
        constraints = [
            # Also GET /lists/{key}/members/ (keyset by recipient id) and the fan-out's
            # one read of a list's members: an index-only scan of one list.
            models.UniqueConstraint(fields=["list", "recipient"], name="list_membership_unique")
        ]

    def __str__(self) -> str:
        return f"{self.list_id}:{self.recipient_id}"


class OptOutSource(models.TextChoices):
    """Where an opt-out came from. A write through the preferences API is recorded as
    ``api:<key name>`` (``api`` without a key): not one of these choices."""

    ONE_CLICK = "one_click", "One-click unsubscribe (List-Unsubscribe-Post)"
    PAGE = "page", "Unsubscribe page"
    API = "api", "API (preferences)"
    ADMIN = "admin", "Admin"
    ESP_UNSUBSCRIBED = "esp_unsubscribed", "Provider: unsubscribed"
    ESP_COMPLAINED = "esp_complained", "Provider: spam complaint"


# The sources that are the person's own act: their opt-outs are sticky
# (recipients.preference_settings).
PERSON_SOURCES = frozenset(
    {
        OptOutSource.ONE_CLICK,
        OptOutSource.PAGE,
        OptOutSource.ESP_UNSUBSCRIBED,
        OptOutSource.ESP_COMPLAINED,
    }
)


class OptOutAction(models.TextChoices):
    OPT_OUT = "opt_out", "Opted out"
    # A sticky opt-out reversed by an explicit write of the same setting to true.
    RESUBSCRIBE = "resubscribe", "Resubscribed"


class OptOut(models.Model):
    """Audit: one row per opt-out written into a recipient's preferences, and one per
    reversal of a sticky one (``action``). Personal (it names the person): erased with
    the recipient."""

    # No index of its own: optout_recipient_at leads with it.
    recipient = models.ForeignKey(
        Recipient, on_delete=models.CASCADE, related_name="opt_outs", db_index=False
    )
    # The preference path set to false, e.g. "categories.marketing" or
    # "workflows.welcome.channels.email".
    scope = models.CharField(max_length=300)
    # An OptOutSource, or "api:<key name>" (the API key that wrote it).
    source = models.CharField(max_length=120)
    action = models.CharField(
        max_length=16,
        choices=OptOutAction.choices,
        default=OptOutAction.OPT_OUT,
        db_default=OptOutAction.OPT_OUT,
    )
    # Where it came from: the workflow and instance of the email, the provider's event.
    details = models.JSONField(default=dict, blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name = "opt-out"
        indexes = [
            # A recipient's opt-out history (admin inline), newest first.
            models.Index(fields=["recipient", "-at"], name="optout_recipient_at"),
        ]

    def __str__(self) -> str:
        verb = "resubscribed to" if self.action == OptOutAction.RESUBSCRIBE else "opted out of"
        return f"{self.recipient_id} {verb} {self.scope} ({self.source})"
