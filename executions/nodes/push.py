"""``push``: a notification to every push device of the recipient - FCM, APNs, Web Push
(``executions.providers.push``) - as one delivery with a result per device
(``executions.target_sends``: a retry sends only to the devices that did not accept
yet; an accepted device is recorded before the next is tried).

Under the recipient's preferences (channel ``push``), the node's send window and the
recipient's quiet hours - in the devices' time zone when they all have the same one
(one device: its own), else the recipient's. A device whose token the provider calls
dead (by its error code) is removed at once (``device_remove_dead``: audited, a
``recipient.device_removed`` event); the others still get the message. No device, or
every one dead: skipped ``missing_channel_data``. A device that names a locale gets the
message rendered in it (once per locale; the keys each such render lacked are in the step
log's ``translation_missing_by_locale``), the others the recipient's - unless the instance
is a test send with a locale: that one wins over every device's."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from django.db import connection

from notifyflow import db
from recipients.channel_data import device_remove_dead, device_secrets
from recipients.models import PushDevice, PushProvider
from workflows.definition import (
    EXPIRES_AFTER_FIELD,
    RETRY_FIELD,
    SEND_WINDOW_FIELD,
    Drawing,
    FieldSpec,
    NodeType,
    node_types,
)
from workflows.definition.links import link_problem
from workflows.definition.variables import json_strings
from workflows.templating import speaks_locale

from .. import audience
from ..locales import other_locale_scope, send_locale
from ..models import SkipReason
from ..providers.base import ProviderError
from ..providers.push import PushMessage, apns, fcm, send_push, webpush
from ..providers.targets import TargetResult
from ..step import NodeResult, StepContext
from ..target_sends import AllTargetsDead, Target, send_to_targets
from .emit import _render_value

CHANNEL = "push"
# Android keeps a message up to 28 days; APNs and the browsers' push services no longer.
MAX_TTL_S = 28 * 24 * 3600


def execute(step: StepContext) -> NodeResult:
    message = _message(step)
    if step.preview:  # sends nothing: what each provider's devices would receive
        return NodeResult(output=_preview(step, message), vars_key=NODE.vars_key(step.node_id))
    skip, rule = audience.preference(step, CHANNEL)
    if skip is not None:
        return skip
    person = step.audience.recipient
    devices = _devices(person.id) if person is not None else []
    if not devices and step.delivery.status is None:  # nothing begun: nothing to finish
        return audience.skipped(step, CHANNEL, SkipReason.MISSING_CHANNEL_DATA)
    deferred = audience.send_window_gate(step, CHANNEL, timezone=shared_timezone(devices))
    if deferred is not None:
        return deferred
    messages = device_messages(step, message, devices)
    try:
        output = send_to_targets(
            step=step,
            channel=CHANNEL,
            targets=[_target(device) for device in devices],
            send=partial(_send_own, messages, message),
            remove_dead=partial(_remove_dead, step),
            noun="device",
        )
    except AllTargetsDead as dead:
        skipped = audience.skipped(step, CHANNEL, SkipReason.MISSING_CHANNEL_DATA)
        skipped.output["removed"] = dead.removed
        return skipped
    return NodeResult(output=audience.with_rule(output, rule), vars_key=NODE.vars_key(step.node_id))


def device_messages(
    step: StepContext, message: PushMessage, devices: Sequence[PushDevice]
) -> dict[str, PushMessage]:
    """The message of each device that names a locale other than the step's (a test
    send's, else the recipient's): rendered once per such locale, when a template of the
    node speaks locale (``speaks_locale``). The others get ``message``. A test send's
    locale wins over the devices' own: every device then gets ``message``."""
    override = step.instance.locale
    rendered: dict[str, PushMessage] = {send_locale(step.audience, override): message}
    own: dict[str, PushMessage] = {}
    templates = {k: v for k, v in step.config.items() if NODE.fields[k].is_template}
    if not any(speaks_locale(text) for _, text in json_strings(templates, "config")):
        return own
    for device in devices:
        locale = send_locale(step.audience, override, device.locale)
        if locale not in rendered:
            scope = other_locale_scope(step, locale=locale)
            rendered[locale] = _message(replace(step, context={**step.context, **scope}))
        own[str(device.pk)] = rendered[locale]
    return own


def _send_own(
    messages: Mapping[str, PushMessage], message: PushMessage, target: Target
) -> TargetResult:
    return _send(messages.get(target.id, message), target)


def shared_timezone(devices: Sequence[PushDevice]) -> str | None:
    """The time zone quiet hours and a ``"recipient"`` send window use: the devices' when
    every one has the same (a single device: its own), else None (the recipient's)."""
    zones = {device.timezone for device in devices}
    if len(zones) == 1:
        return zones.pop() or None
    return None


# pushdevice_unique_token leads with the recipient: an index scan of one person. A
# prepared statement: the ORM's query building was most of this read's cost, paid on
# every push step (bench/RESULTS.md, issue 41).
DEVICES_SQL = (
    "SELECT id, provider, token, keys, timezone, locale"
    f" FROM {PushDevice._meta.db_table} WHERE recipient_id = %s ORDER BY created_at, id"
)


def _devices(recipient_id: str) -> list[PushDevice]:
    with connection.cursor() as cursor:
        rows = db.execute(cursor, DEVICES_SQL, [recipient_id]).fetchall()
    return [
        PushDevice(
            id=pk if isinstance(pk, uuid.UUID) else uuid.UUID(pk),  # SQLite: hex text
            recipient_id=recipient_id,
            provider=provider,
            token=token,
            keys=json.loads(keys) if isinstance(keys, str) else keys,
            timezone=zone,
            locale=locale,
        )
        for pk, provider, token, keys, zone, locale in rows
    ]


def _target(device: PushDevice) -> Target:
    address = device.subscription if device.provider == PushProvider.WEBPUSH else device.token
    return Target(
        id=str(device.pk),
        provider=device.provider,
        label=device.short_token,
        address=address,
        secrets=tuple(device_secrets(device)),
    )


def _send(message: PushMessage, target: Target) -> TargetResult:
    return send_push(provider=target.provider, token=target.address, message=message)


def _remove_dead(step: StepContext, target: Target, result: TargetResult) -> bool:
    return device_remove_dead(
        device_id=target.id,
        provider=target.provider,
        reason_code=result.code,
        details={"instance": str(step.instance_id), "node": step.node_id},
    )


def _message(step: StepContext) -> PushMessage:
    """The notification, rendered: title and body (not both empty unless ``data`` has
    something: a data-only push), ``url`` a link a person may follow, ``data``'s strings
    rendered. A permanent ProviderError naming the field otherwise."""
    config = step.config
    title, body = step.render("title").strip(), step.render("body").strip()
    data = _render_value(config.get("data") or {}, step, "data")
    if not (title or body or data):
        raise ProviderError("title, body: render to nothing (and no data)", permanent=True)
    url = (step.render_optional("url") or "").strip()
    problem = link_problem(url)
    if problem is not None:
        raise ProviderError(f"url: {problem}", permanent=True)
    return PushMessage(
        title=title,
        body=body,
        url=url,
        data=data,
        badge=config.get("badge"),
        sound=(step.render_optional("sound") or "").strip(),
        ttl=config.get("ttl"),
        collapse_key=(step.render_optional("collapse_key") or "").strip(),
    )


def _preview(step: StepContext, message: PushMessage) -> dict[str, Any]:
    """What a send would post: the payload per provider, and the recipient's devices
    (each gets its provider's payload; none without a recipient)."""
    person = step.audience.recipient
    devices = _devices(person.id) if person is not None else []
    return {
        "preview": True,
        "channel": CHANNEL,
        "payloads": {
            "fcm": fcm.fcm_message("<registration token>", message),
            "apns": apns_preview(message),
            "webpush": json.loads(webpush.webpush_payload(message)),
        },
        "devices": [
            {"id": str(d.pk), "provider": d.provider, "token": d.short_token} for d in devices
        ],
    }


def apns_preview(message: PushMessage) -> dict[str, Any]:
    """APNs' body and the headers that carry the rest (no provider token)."""
    headers = apns.apns_headers(message, topic="<NOTIFYFLOW_APNS_TOPIC>", bearer="")
    headers.pop("authorization")
    return {"headers": headers, "payload": apns.apns_payload(message)}


def _summary(config: Mapping[str, Any]) -> str:
    title = config.get("title")
    return f"{title} → devices" if isinstance(title, str) and title else "to every device"


NODE = node_types.register(
    NodeType(
        name="push",
        description="Send a push notification to every device of the recipient (FCM, APNs, "
        "Web Push): one delivery with a result per device; a dead token is removed, a "
        "rate-limited or failing provider retried for its devices only. Output in "
        "`vars.push_<node id>`: {devices, accepted, removed, failed, message_id, sent_at}.",
        fields={
            "title": FieldSpec(True, "template", "The notification's title (template)."),
            "body": FieldSpec(True, "template", "The notification's text (template)."),
            "url": FieldSpec(
                False,
                "link",
                "Where a tap leads (template): an http(s) URL or a relative path; the apps "
                "get it as `url` in their data.",
            ),
            "data": FieldSpec(
                False,
                "template_object",
                "Key/values for the app (a JSON object; string values are templates; FCM "
                "gets every value as a string).",
            ),
            "badge": FieldSpec(
                False, "integer", "The app icon's badge count (iOS).", minimum=0, maximum=99_999
            ),
            "sound": FieldSpec(False, "template", 'A sound to play ("default", or a file name).'),
            "ttl": FieldSpec(
                False,
                "integer",
                "Seconds a provider keeps the message for an offline device (0: now or never; "
                "default: the provider's).",
                minimum=0,
                maximum=MAX_TTL_S,
            ),
            "collapse_key": FieldSpec(
                False,
                "template",
                "A newer message with the same key replaces an undelivered older one.",
            ),
            "retry": RETRY_FIELD,
            "send_window": SEND_WINDOW_FIELD,
            "expires_after": EXPIRES_AFTER_FIELD,
        },
        run=execute,
        channel=CHANNEL,
        drawing=Drawing(colour="#c2410c", summary=_summary, mermaid=("[/", "/]")),
    )
)
