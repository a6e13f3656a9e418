"""A step as a node sees it: what it gets (``StepContext``: the rendered scope, the
instance and node, the delivery guard's keys) and what it returns (``NodeResult``), plus
the recipient and header checks every sending node applies. Below ``nodes`` and
``deliveries``, which both use it."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ValidationError
from django.core.validators import validate_email

from workflows.templating import TemplateError, render

from .providers.base import ProviderError

if TYPE_CHECKING:
    from translations.translator import Translator
    from triggers.models import TriggerInstance


@dataclass(frozen=True)
class StepRecipient:
    """The instance's recipient as its row reads when the step runs: a changed
    address or preference is used by the next step. ``preferences`` is for the send's
    check only; templates see the rest (``as_context``)."""

    id: str
    email: str | None = None
    phone: str | None = None
    timezone: str | None = None
    locale: str | None = None
    properties: dict[str, Any] = field(default_factory=dict)
    preferences: dict[str, Any] = field(default_factory=dict)

    def as_context(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "email": self.email,
            "phone": self.phone,
            "timezone": self.timezone,
            "locale": self.locale,
            "properties": self.properties,
        }


@dataclass(frozen=True)
class Audience:
    """Who a step sends to and under which workflow settings, read when it runs: the
    recipient (None: a payload-only instance) and the workflow's ``critical`` and
    ``categories`` (what the preference check and the unsubscribe scope use)."""

    recipient: StepRecipient | None = None
    critical: bool = False
    categories: tuple[str, ...] = ()
    # The instance's recipient was erased (then ``recipient`` is None).
    recipient_erased: bool = False
    # The workflow's ``default_locale`` ("": the setting's).
    default_locale: str = ""


NO_AUDIENCE = Audience()
# ``recipient`` of an instance without one: every field empty, so a template reading
# ``recipient.email`` renders nothing rather than failing (a payload-only workflow).
NO_RECIPIENT: dict[str, Any] = {
    **{name: None for name in StepRecipient.__dataclass_fields__ if name != "preferences"},
    "properties": {},
}


@dataclass
class DeliveryState:
    """The delivery guard's state of this step's send (``executions.deliveries``): what
    the claim saw of this node's delivery, and the outcome the guard hands to the step's
    record."""

    # What the claim saw (None: no send begun yet).
    status: str | None = None
    output: dict[str, Any] | None = None
    # The outcome to record with the step's result.
    pending: dict[str, Any] = field(default_factory=dict)
    # Its attempt number (the node's, a crashed attempt counted) and channel, and one
    # entry per provider call (failover), written as DeliveryAttempt rows with the outcome.
    attempt: int = 0
    channel: str = ""
    attempts: list[dict[str, Any]] = field(default_factory=list)
    # A send to several targets (``target_sends``): each target's result by its id,
    # recorded with the outcome whatever it is (None: a single send).
    targets: dict[str, dict[str, Any]] | None = None
    # What of the person's channel data the send read (tokens, webhook URLs): an
    # erasure committed while it ran has deleted the rows, not what the step writes.
    secrets: list[str] = field(default_factory=list)


@dataclass
class StepContext:
    """Everything a node executor may use. ``context`` is what templates see;
    ``instance`` is the claimed row as read (what a node parked on, until when, its
    workflow: ``wait_deadline``, ``waiting_for_event``, ``parked_on``, ``workflow_id``),
    in a preview an unsaved one."""

    instance: TriggerInstance
    node_id: str
    node_type: str
    config: dict[str, Any]
    context: dict[str, Any]
    now: datetime
    # The recipient and the workflow's settings, read when the step runs.
    audience: Audience = NO_AUDIENCE
    workflow_key: str = ""
    # Preview: render and choose the path, but send and write nothing.
    preview: bool = False
    delivery: DeliveryState = field(default_factory=DeliveryState)
    # The translators of its renders in a locale other than its own (a push device's,
    # ``locales.other_locale_scope``): the step log reports what they lacked too.
    other_renders: list[Translator] = field(default_factory=list)

    @property
    def instance_id(self) -> uuid.UUID:
        return self.instance.pk

    @property
    def idempotency_key(self) -> str:
        return f"{self.instance_id}:{self.node_id}"

    def render(self, field_name: str, *, html: bool = False) -> str:
        try:
            return render(self.config[field_name], self.context, html=html)
        except TemplateError as exc:
            # A render error is the workflow author's bug: retrying cannot fix it.
            raise ProviderError(f"{field_name}: template error: {exc}", permanent=True) from exc

    def render_optional(self, field_name: str, *, html: bool = False) -> str | None:
        if self.config.get(field_name) in (None, ""):
            return None
        return self.render(field_name, html=html)

    def render_header(self, field_name: str) -> str:
        """A header's value: surrounding whitespace dropped; CR or LF left inside is a
        permanent error (header injection, and retrying cannot fix it)."""
        return header_value(field_name, self.render(field_name).strip())

    def render_recipients(self, field_name: str, *, kind: str) -> list[str]:
        """Each template of the field (one, or a JSON list) renders to exactly one
        address, validated for ``kind`` (``email`` or ``sms``); rendered text is never
        split into several recipients. Raises a permanent ProviderError naming the field."""
        templates = self.config[field_name]
        if isinstance(templates, str):
            templates = [templates]
        addresses = []
        for index, source in enumerate(templates):
            where = field_name if len(templates) == 1 else f"{field_name}[{index}]"
            try:
                text = render(source, self.context).strip()
            except TemplateError as exc:
                raise ProviderError(f"{where}: template error: {exc}", permanent=True) from exc
            addresses.append(recipient(where, text, kind=kind))
        return addresses


E164 = re.compile(r"^\+[1-9][0-9]{1,14}$")


def header_value(field_name: str, value: str) -> str:
    if "\r" in value or "\n" in value:
        raise ProviderError(f"{field_name}: a header must not contain CR or LF", permanent=True)
    return value


def recipient(field_name: str, value: str, *, kind: str) -> str:
    """``value`` if it is exactly one valid address of ``kind``, else a permanent error."""
    header_value(field_name, value)
    shown = value if len(value) <= 80 else value[:80] + "…"
    if kind == "sms":
        if not E164.match(value):
            raise ProviderError(
                f"{field_name}: {shown!r} is not one phone number in E.164 form (+15551234567)",
                permanent=True,
            )
        return value
    try:
        validate_email(value)
    except ValidationError:
        raise ProviderError(
            f"{field_name}: {shown!r} is not exactly one valid email address", permanent=True
        ) from None
    return value


@dataclass
class NodeResult:
    """What a node produced, in terms the engine and the recorder act on without knowing
    the node's type: output for the step log, what to merge into ``vars``, when the next
    node becomes due, whether to park here, the rows written with the outcome, and what
    to do once it committed."""

    output: dict[str, Any] = field(default_factory=dict)
    vars_key: str | None = None
    # The next node becomes due then (a delay).
    resume_at: datetime | None = None
    # Stay at this node until ``park_until`` (enqueued, holding no worker), woken earlier
    # by a delivery of ``wait_event`` to the instance's inbox (events up to
    # ``inbox_seen_id`` were looked at and did not match).
    park_until: datetime | None = None
    wait_event: str | None = None
    inbox_seen_id: int = 0
    # An inbox event the node took: consumed in the step's outcome transaction.
    consume_inbox_id: int | None = None
    # An event to raise: the outbox row written in the step's outcome transaction
    # (``triggers.outbox``), processed by ``after_commit``.
    emit: dict[str, Any] | None = None
    # The node chose not to send: a SkipReason value; the step succeeds.
    skip_reason: str = ""
    # A gate parks (with ``park_until``): what it waits on (``ParkedOn``).
    # ``vars_key``'s output is merged into vars as it parks.
    park_on: str = ""
    # The node ends the instance's path: it completes, its edges are not followed (a
    # throttled skip, a batch member).
    end: bool = False
    # Called once the outcome is committed (not when the record was fenced out): an
    # emitted event's processing, a look for what arrived while parking.
    after_commit: Callable[[], None] | None = None
    # A preview shows it next to the node's output.
    note: str = ""
