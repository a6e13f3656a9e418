"""People a workflow notifies: recipients, their preferences, lists
(topics) and memberships, the audit of every opt-out, and their channel data - push
devices and chat connections (``recipients.channel_data``) - with the audit of every
removal."""

from __future__ import annotations

import secrets
from urllib.parse import urlsplit

from django.db import models
from django.db.models.functions import Lower

from notifyflow.ids import uuid7


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
    # The generation of its feed tokens (feed.tokens): a token carries the one
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


class PushProvider(models.TextChoices):
    FCM = "fcm", "Firebase Cloud Messaging (Android, iOS through Firebase)"
    APNS = "apns", "Apple Push Notification service"
    WEBPUSH = "webpush", "Web Push (a browser's subscription)"


class PushDevice(models.Model):
    """One device of a recipient's: an app install or a browser, each with its own
    locale and time zone. ``token`` is what the provider addresses: an FCM registration
    token, an APNs device token (hex, stored lower-case), or - for ``webpush`` - the
    subscription's ``endpoint`` URL, whose ``keys`` (``{p256dh, auth}``, base64url as
    the browser gave them) are in ``keys``, null for the other providers. The API shows
    a Web Push device's token as the subscription again (``{endpoint, keys}``).

    At most ``channel_data.MAX_DEVICES`` per recipient (the service's rule). Secret
    enough (a Web Push endpoint is a capability URL): shown shortened in the console,
    never in an event or an audit row; erased with the recipient (cascade)."""

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    # No index of its own: pushdevice_unique_token leads with it.
    recipient = models.ForeignKey(
        Recipient, on_delete=models.CASCADE, related_name="push_devices", db_index=False
    )
    provider = models.CharField(max_length=8, choices=PushProvider.choices)
    token = models.CharField(max_length=1024)
    keys = models.JSONField(null=True, blank=True)
    locale = models.CharField(max_length=35, null=True, blank=True)
    # An IANA time zone name, validated at the edges; quiet hours and send windows use
    # it for this device when set.
    timezone = models.CharField(max_length=64, null=True, blank=True)
    # The app (bundle id, package name, a name of the caller's) it was registered for.
    app = models.CharField(max_length=200, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["recipient_id", "created_at", "id"]
        verbose_name = "push device"
        constraints = [
            # Also every read of a recipient's devices (GET, the push node's, a PUT's
            # diff, an add by token): an index scan of one recipient.
            models.UniqueConstraint(
                fields=["recipient", "provider", "token"], name="pushdevice_unique_token"
            ),
            models.CheckConstraint(
                condition=models.Q(provider__in=PushProvider.values),
                name="pushdevice_provider_valid",
            ),
            # A Web Push subscription has its keys; FCM and APNs tokens have none.
            models.CheckConstraint(
                condition=models.Q(provider=PushProvider.WEBPUSH, keys__isnull=False)
                | (~models.Q(provider=PushProvider.WEBPUSH) & models.Q(keys__isnull=True)),
                name="pushdevice_keys_only_webpush",
            ),
        ]

    def __str__(self) -> str:
        # Never the token: this is what the admin's log and messages quote.
        return f"{self.get_provider_display()} device {self.pk}"

    @property
    def short_token(self) -> str:
        """The token's last characters, enough to tell devices apart on a page."""
        return short_secret(self.token)

    @property
    def subscription(self) -> dict[str, object] | None:
        """A Web Push device's subscription as the browser gave it: ``{endpoint, keys}``."""
        if self.provider != PushProvider.WEBPUSH:
            return None
        return {"endpoint": self.token, "keys": dict(self.keys or {})}


def short_secret(text: str, shown: int = 8) -> str:
    """The last characters of ``text`` behind an ellipsis: ``shown`` of them, and never
    more than a quarter of it (what tells rows apart, never the secret)."""
    return f"…{text[len(text) - min(shown, len(text) // 4) :]}"


class ChatProvider(models.TextChoices):
    SLACK = "slack", "Slack"
    MSTEAMS = "msteams", "Microsoft Teams"
    DISCORD = "discord", "Discord"


class ChatConnection(models.Model):
    """Where a recipient is reached in a chat app, in exactly one form (the check
    constraint): a Slack ``channel`` or ``user`` id that the bot token of the settings
    posts to (``chat.postMessage``), or an incoming ``webhook_url`` (Slack, Microsoft
    Teams, Discord) on the webhook allow-list. Erased with the recipient (cascade)."""

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    # Indexed: a recipient's connections (GET, the chat node's read, a PUT's diff).
    recipient = models.ForeignKey(
        Recipient, on_delete=models.CASCADE, related_name="chat_connections"
    )
    provider = models.CharField(max_length=8, choices=ChatProvider.choices)
    channel = models.CharField(max_length=100, null=True, blank=True)
    user = models.CharField(max_length=100, null=True, blank=True)
    # A secret URL: the console shows its host only.
    webhook_url = models.CharField(max_length=1024, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["recipient_id", "created_at", "id"]
        verbose_name = "chat connection"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(provider__in=ChatProvider.values),
                name="chatconnection_provider_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(
                    webhook_url__isnull=False, channel__isnull=True, user__isnull=True
                )
                | models.Q(
                    provider=ChatProvider.SLACK,
                    webhook_url__isnull=True,
                    channel__isnull=False,
                    user__isnull=True,
                )
                | models.Q(
                    provider=ChatProvider.SLACK,
                    webhook_url__isnull=True,
                    channel__isnull=True,
                    user__isnull=False,
                ),
                name="chatconnection_one_form",
            ),
            # One row per target and recipient (a PUT's duplicates collapse into one).
            models.UniqueConstraint(
                fields=["recipient", "webhook_url"],
                condition=models.Q(webhook_url__isnull=False),
                name="chatconnection_unique_webhook",
            ),
            models.UniqueConstraint(
                fields=["recipient", "channel"],
                condition=models.Q(channel__isnull=False),
                name="chatconnection_unique_channel",
            ),
            models.UniqueConstraint(
                fields=["recipient", "user"],
                condition=models.Q(user__isnull=False),
                name="chatconnection_unique_user",
            ),
        ]

    def __str__(self) -> str:
        # Never the webhook URL: this is what the admin's log and messages quote.
        return f"{self.get_provider_display()} connection {self.pk}"

    @property
    def webhook_host(self) -> str | None:
        """The host of ``webhook_url`` (all the console shows of it)."""
        if not self.webhook_url:
            return None
        return urlsplit(self.webhook_url).hostname or "?"


class ChannelDataKind(models.TextChoices):
    PUSH = "push", "Push device"
    CHAT = "chat", "Chat connection"


class ChannelDataRemoval(models.Model):
    """Audit: one row per push device or chat connection removed - found dead by a
    send (``reason``: the provider's error code, ``source`` ``provider``), deleted or
    replaced over the API (``api:<key name>``) or in the console
    (``admin:<username>``). What it names is shortened (a token's last characters, a
    webhook's host), never the secret itself. Personal: erased with the recipient."""

    # No index of its own: channelremoval_recipient_at leads with it.
    recipient = models.ForeignKey(
        Recipient,
        on_delete=models.CASCADE,
        related_name="channel_data_removals",
        db_index=False,
    )
    channel = models.CharField(max_length=8, choices=ChannelDataKind.choices)
    # The removed device's or connection's id (the row is gone).
    target_id = models.UUIDField()
    provider = models.CharField(max_length=8)
    # What it was, shortened: "…" and a token's last characters, a webhook's host, a
    # Slack channel or user id.
    target = models.CharField(max_length=200)
    # The provider's error code (UNREGISTERED, BadDeviceToken, 410), or
    # deleted / replaced / cleared for a removal someone asked for.
    reason = models.CharField(max_length=100)
    # "provider", "api:<key name>", "admin:<username>".
    source = models.CharField(max_length=120)
    # Where a dead one was found: the instance and node of the send.
    details = models.JSONField(default=dict, blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name = "channel data removal"
        indexes = [
            # A recipient's removal history (the console's inline), newest first.
            models.Index(fields=["recipient", "-at"], name="channelremoval_recipient_at"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(channel__in=ChannelDataKind.values),
                name="channelremoval_channel_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.recipient_id}: {self.channel} {self.target} removed ({self.reason})"
