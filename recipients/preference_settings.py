"""Writing a recipient's preferences (``GET/PUT/PATCH /recipients/{id}/preferences/``):
the shape they must have, how a PATCH merges, the audit row of every opt-out they set,
and the sticky opt-outs they keep. ``recipients.preferences`` reads them (the one rule).

Sticky opt-outs (docs/api.md#sticky-opt-outs): an opt-out the person made themselves
(``preferences.sticky_scopes``) stays false through a PUT or PATCH that does not
mention it; only a write of that same setting to ``true`` reverses it, and each
reversal is an audit row (action ``resubscribe``, source ``api:<key name>``) and a
``recipient.resubscribed`` status event. A write that would override it another way
(an object for an entry the person opted out of whole, ``true`` for an entry holding
their channel opt-out) is refused: 409 ``opted_out`` naming the setting."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from django.db import transaction

from notifyflow.errors import ApplicationError, ConflictError, NotFoundError
from status_webhooks import events as status_events
from status_webhooks.outbox import record
from workflows.models import Workflow

from .models import OptOut, OptOutAction, OptOutSource, Recipient
from .preferences import CHANNELS, Decision, evaluate, sticky_scopes, with_opt_out
from .services import recipient_or_404

SECTIONS = ("channels", "categories", "workflows", "quiet_hours")
TIME = re.compile(r"^([01][0-9]|2[0-3]):[0-5][0-9]$")


def _error(code: str, field: str, message: str) -> ApplicationError:
    return ApplicationError(code=code, field=field, message=f"{field}: {message}")


def _channels(value: Any, field: str) -> dict[str, bool | None]:
    if not isinstance(value, Mapping):
        raise _error("not_an_object", field, "must be an object of channel: true|false")
    for channel, setting in value.items():
        if channel not in CHANNELS:
            raise _error(
                "unknown_channel", f"{field}.{channel}", f"not a channel ({', '.join(CHANNELS)})"
            )
        if setting is not None and not isinstance(setting, bool):
            raise _error("not_a_boolean", f"{field}.{channel}", "must be true or false")
    return dict(value)


def _entries(value: Any, field: str) -> dict[str, Any]:
    """``categories`` / ``workflows``: slug -> true | false | {channels: {...}}."""
    if not isinstance(value, Mapping):
        raise _error("not_an_object", field, "must be an object of slug: setting")
    for slug, setting in value.items():
        # Any name is kept (the schema cannot constrain object keys): one that is not a
        # category slug or a workflow key never matches a send.
        name = f"{field}.{slug}"
        if setting is None or isinstance(setting, bool):
            continue
        if not isinstance(setting, Mapping) or set(setting) - {"channels"}:
            raise _error(
                "invalid_setting", name, 'must be true, false or {"channels": {channel: bool}}'
            )
        _channels(setting.get("channels", {}), f"{name}.channels")
    return dict(value)


def _quiet_hours(value: Any, field: str = "quiet_hours") -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise _error("not_an_object", field, 'must be {"from": "HH:MM", "until": "HH:MM"} or null')
    for name in value:
        if name not in ("from", "until"):
            raise _error("unknown_field", f"{field}.{name}", "unknown field; expected from, until")
    for name in ("from", "until"):
        if name not in value:
            raise _error("required", f"{field}.{name}", "required (HH:MM)")
        if not isinstance(value[name], str) or not TIME.match(value[name]):
            raise _error("invalid_time", f"{field}.{name}", "must be a time HH:MM (00:00-23:59)")
    if value["from"] == value["until"]:
        # Neither "always quiet" nor "never": refused, as a send window's is.
        raise _error("empty_window", f"{field}.until", "must differ from from")
    return {"from": value["from"], "until": value["until"]}


def check_preferences(value: Any) -> dict[str, Any]:
    """``value`` if it has the preferences' shape, else an ApplicationError naming the
    first wrong field with a stable code. Null entries are allowed (a PATCH removes
    them; a PUT drops them)."""
    if not isinstance(value, Mapping):
        raise _error("not_an_object", "body", "must be a JSON object")
    for section in value:
        if section not in SECTIONS:
            raise _error(
                "unknown_field",
                str(section),
                f"unknown field; expected one of: {', '.join(SECTIONS)}",
            )
    checked: dict[str, Any] = {}
    for section, setting in value.items():
        if section == "quiet_hours":
            checked[section] = _quiet_hours(setting)
        elif setting is None:
            checked[section] = None
        elif section == "channels":
            checked[section] = _channels(setting, section)
        else:
            checked[section] = _entries(setting, section)
    return checked


def _without_nulls(section: Mapping[str, Any] | None) -> dict[str, Any]:
    return {name: value for name, value in (section or {}).items() if value is not None}


def replaced(value: Mapping[str, Any]) -> dict[str, Any]:
    """The stored form of a PUT body: sections left out are empty, null entries dropped."""
    prefs: dict[str, Any] = {
        section: _without_nulls(value.get(section)) for section in SECTIONS[:3]
    }
    prefs["quiet_hours"] = value.get("quiet_hours")
    return prefs


def merged(current: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """A PATCH: each named entry replaces the one it names (null removes it); a section
    set to null is emptied; ``quiet_hours`` is replaced as a whole."""
    prefs = replaced(current)
    for section, value in patch.items():
        if section == "quiet_hours":
            prefs[section] = value
        elif value is None:
            prefs[section] = {}
        else:
            prefs[section] = _without_nulls({**prefs[section], **value})
    return prefs


def opted_out_paths(preferences: Mapping[str, Any] | None) -> set[str]:
    """Every setting that says false, as an opt-out scope ("categories.marketing",
    "workflows.welcome.channels.email", "channels.sms")."""
    prefs = preferences or {}
    paths = {f"channels.{c}" for c, v in (prefs.get("channels") or {}).items() if v is False}
    for section in ("categories", "workflows"):
        for name, entry in (prefs.get(section) or {}).items():
            if entry is False:
                paths.add(f"{section}.{name}")
            elif isinstance(entry, Mapping):
                for channel, value in (entry.get("channels") or {}).items():
                    if value is False:
                        paths.add(f"{section}.{name}.channels.{channel}")
    return paths


def setting_at(preferences: Mapping[str, Any] | None, scope: str, *, covering: bool = True) -> Any:
    """The value at an opt-out scope's path (None where nothing is set). For a channel
    inside an entry set to a bare ``true``/``false``, that bool (it covers every
    channel) - unless not ``covering``: then only the channel's own setting counts."""
    section, name, *rest = scope.split(".")
    entries = (preferences or {}).get(section)
    if not isinstance(entries, Mapping):
        return None
    entry = entries.get(name)
    if section == "channels" or not rest:
        return entry
    if not isinstance(entry, Mapping):
        return entry if covering else None
    channels = entry.get("channels")
    return channels.get(rest[-1]) if isinstance(channels, Mapping) else None


def _keep_sticky(after: dict[str, Any], scopes: set[str]) -> dict[str, Any]:
    """``after`` with every sticky scope still false; ConflictError ``opted_out`` where
    keeping it would undo what the write itself set there."""
    for scope in sorted(scopes):
        value = setting_at(after, scope)
        if value is False:
            continue
        section, name, *rest = scope.split(".")
        if (not rest and isinstance(value, Mapping)) or (rest and value is True):
            field = scope if not rest else f"{section}.{name}"
            raise ConflictError(
                code="opted_out",
                field=field,
                message=f"{field}: the person opted out of {scope} themselves (an unsubscribe"
                f" link or their email provider); only {scope}: true reverses that",
            )
        after = with_opt_out(after, scope)
    return after


def preferences_set(
    *, recipient_id: str, preferences: Mapping[str, Any], merge: bool, actor: str = ""
) -> Recipient:
    """Replace (PUT) or merge (PATCH) the recipient's preferences, checked by
    ``check_preferences``, keeping the person's sticky opt-outs (the module says how).
    Every opt-out it newly sets is an audit row and a ``recipient.unsubscribed`` status
    event, every sticky one it reverses a ``resubscribe`` row and a
    ``recipient.resubscribed`` event - source ``actor`` (``api:<key name>``; ``api``
    without one) - in the same transaction. NotFoundError for an unknown recipient."""
    source = actor or OptOutSource.API
    with transaction.atomic():
        recipient = recipient_or_404(recipient_id, for_update=True)
        before = recipient.preferences or {}
        after = merged(before, preferences) if merge else replaced(preferences)
        sticky = sticky_scopes(recipient_id=recipient.pk) & opted_out_paths(before)
        reversed_ = {
            scope for scope in sticky if setting_at(preferences, scope, covering=False) is True
        }
        after = _keep_sticky(after, sticky - reversed_)
        recipient.preferences = after
        recipient.save(update_fields=["preferences", "updated_at"])
        new = sorted(opted_out_paths(after) - opted_out_paths(before))
        changes = [(scope, OptOutAction.OPT_OUT) for scope in new]
        changes += [(scope, OptOutAction.RESUBSCRIBE) for scope in sorted(reversed_)]
        OptOut.objects.bulk_create(
            [
                OptOut(recipient=recipient, scope=scope, source=source, action=action)
                for scope, action in changes
            ]
        )
        record(
            events=[
                (
                    status_events.recipient_unsubscribed
                    if action == OptOutAction.OPT_OUT
                    else status_events.recipient_resubscribed
                )(recipient_id=recipient.pk, scope=scope, source=source)
                for scope, action in changes
            ]
        )
    return recipient


def preferences_of(recipient: Recipient) -> dict[str, Any]:
    """The preferences as the API shows them: every section present."""
    return replaced(recipient.preferences or {})


def preference_decision(*, recipient_id: str, workflow_key: str, channel: str) -> Decision:
    """What the one rule decides for a ``channel`` message of workflow ``workflow_key``
    to the recipient (``GET .../preferences/evaluate/``): nothing is sent. NotFoundError
    for an unknown recipient or workflow."""
    recipient = recipient_or_404(recipient_id)
    workflow = Workflow.objects.filter(key=workflow_key).only("key", "critical", "categories")
    found = workflow.first()
    if found is None:
        raise NotFoundError(
            code="unknown_workflow",
            field="workflow",
            message=f"workflow: no workflow with key {workflow_key!r}",
        )
    return evaluate(
        preferences=recipient.preferences,
        workflow_key=found.key,
        categories=list(found.categories or []),
        channel=channel,
        critical=found.critical,
    )
