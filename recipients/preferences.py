"""The one rule that decides whether a recipient gets a message, the one
writer of the person's own opt-outs, and which of them are sticky.

``evaluate`` is called once per send, when the step runs, and by
``GET /recipients/{id}/preferences/evaluate/``; the step records its ``rule``. The most
specific explicit setting wins: workflow x channel, workflow, category x channel,
category (the workflow's categories in their order), channel, then "send".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from status_webhooks import events as status_events
from status_webhooks.outbox import record

from .models import PERSON_SOURCES, OptOut, OptOutAction, Recipient

# The channels a preference may name: each sending node type's (its ``channel``).
CHANNELS = ("email", "sms", "in_app", "push", "chat")
# The rule of a send nothing decided against.
DEFAULT_RULE = "default"
# The rule of a critical workflow's send: preferences are not read.
CRITICAL_RULE = "critical"


@dataclass(frozen=True)
class Decision:
    send: bool
    # The setting that decided, as a path into the preferences
    # ("categories.marketing.channels.email"), or DEFAULT_RULE / CRITICAL_RULE.
    rule: str


def _explicit(entry: Any, channel: str) -> tuple[bool | None, bool | None]:
    """An entry's (channel setting, whole-entry setting): ``true``/``false`` or a
    ``{channels: {...}}`` object; None where it says nothing."""
    if isinstance(entry, bool):
        return None, entry
    if isinstance(entry, Mapping):
        value = (entry.get("channels") or {}).get(channel)
        return (value if isinstance(value, bool) else None), None
    return None, None


def evaluate(
    *,
    preferences: Mapping[str, Any] | None,
    workflow_key: str,
    categories: Sequence[str],
    channel: str,
    critical: bool = False,
) -> Decision:
    """Whether a ``channel`` message of workflow ``workflow_key`` (in ``categories``)
    goes to a recipient with these ``preferences``, and the rule that decided."""
    if critical:
        return Decision(True, CRITICAL_RULE)
    prefs = preferences or {}
    by_channel, whole = _explicit((prefs.get("workflows") or {}).get(workflow_key), channel)
    if by_channel is not None:
        return Decision(by_channel, f"workflows.{workflow_key}.channels.{channel}")
    if whole is not None:
        return Decision(whole, f"workflows.{workflow_key}")
    set_categories = prefs.get("categories") or {}
    entries = [(slug, _explicit(set_categories.get(slug), channel)) for slug in categories]
    for slug, (by_channel, _) in entries:
        if by_channel is not None:
            return Decision(by_channel, f"categories.{slug}.channels.{channel}")
    for slug, (_, whole) in entries:
        if whole is not None:
            return Decision(whole, f"categories.{slug}")
    value = (prefs.get("channels") or {}).get(channel)
    if isinstance(value, bool):
        return Decision(value, f"channels.{channel}")
    return Decision(True, DEFAULT_RULE)


def unsubscribe_scope(*, workflow_key: str, categories: Sequence[str]) -> str:
    """What an unsubscribe link of this workflow opts out of: its first category, else
    the workflow itself (a preference path)."""
    return f"categories.{categories[0]}" if categories else f"workflows.{workflow_key}"


def with_opt_out(preferences: Mapping[str, Any] | None, scope: str) -> dict[str, Any]:
    """``preferences`` with ``scope`` ("categories.<slug>", "workflows.<key>",
    "channels.<channel>", or either of the first two + ".channels.<channel>") set false."""
    prefs: dict[str, Any] = {k: v for k, v in (preferences or {}).items()}
    section, name, *rest = scope.split(".")
    entries = dict(prefs.get(section) or {})
    if section == "channels" or not rest:
        entries[name] = False
    else:  # <section>.<name>.channels.<channel>
        entry = entries.get(name)
        entry = dict(entry) if isinstance(entry, Mapping) else {}
        entry["channels"] = {**(entry.get("channels") or {}), rest[-1]: False}
        entries[name] = entry
    prefs[section] = entries
    return prefs


def opt_out(
    *, recipient_id: str, scope: str, source: str, details: Mapping[str, Any] | None = None
) -> bool:
    """Write the opt-out ``scope`` into the recipient's preferences with its audit row
    and its ``recipient.unsubscribed`` status event, in one transaction. Idempotent:
    False (and no row) when the scope already says false - unless this is the person's
    own act (``PERSON_SOURCES``) and the false was not theirs yet (an API write): then
    the row is written, making the opt-out sticky - or the recipient is gone (erased)."""
    with transaction.atomic():
        recipient = Recipient.objects.select_for_update().filter(pk=recipient_id).first()
        if recipient is None:
            return False
        updated = with_opt_out(recipient.preferences, scope)
        if updated == recipient.preferences:
            if source not in PERSON_SOURCES or scope in sticky_scopes(recipient_id=recipient.pk):
                return False
        else:
            recipient.preferences = updated
            recipient.save(update_fields=["preferences", "updated_at"])
        OptOut.objects.create(
            recipient=recipient, scope=scope, source=source, details=dict(details or {})
        )
        record(
            events=[
                status_events.recipient_unsubscribed(
                    recipient_id=recipient.pk, scope=scope, source=source
                )
            ]
        )
    return True


def sticky_scopes(*, recipient_id: str) -> set[str]:
    """The scopes the person opted out of themselves (sticky opt-outs): those whose
    latest audit row is an opt-out from one of ``PERSON_SOURCES`` (one-click, the
    unsubscribe page, an ESP's unsubscribe or complaint), not reversed since. A
    preferences write keeps them false unless it writes that same setting to true
    (``preference_settings.preferences_set``). One read of the recipient's audit rows
    (optout_recipient_at)."""
    latest: dict[str, tuple[str, str]] = {}
    rows = (
        OptOut.objects.filter(recipient_id=recipient_id)
        .order_by("-at", "-id")
        .values_list("scope", "source", "action")
    )
    for scope, source, action in rows:
        latest.setdefault(scope, (source, action))
    return {
        scope
        for scope, (source, action) in latest.items()
        if action == OptOutAction.OPT_OUT and source in PERSON_SOURCES
    }
