"""What a definition may hold: the node types, each config field's kind and meaning
(the validator, the JSON Schema and the docs read these tables), and the limits."""

from __future__ import annotations

import re
from dataclasses import dataclass

NODE_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MAX_THROTTLE_LIMIT = 10_000
# A batch node's max_items (SPEC §13).
BATCH_MIN_ITEMS, BATCH_MAX_ITEMS = 2, 10_000


@dataclass(frozen=True)
class FieldSpec:
    required: bool
    # "template" | "html_template" | "int" (milliseconds, bounded) | "duration" |
    # "window" (a duration > 0: a gate's window, an expiry) | "link" (a template of a URL
    # shown to a person: http(s) or a relative path, definition/links.py) | "name"
    # (a plain non-empty string) | "condition" (a Liquid expression) | "template_list" |
    # "template_object" | "recipients" (one address template, or a JSON list of them:
    # each renders to exactly one address, never split) | "retry_policy" |
    # "http_method" | "webhook_url" | "send_window" ({days, from, until, timezone})
    kind: str
    # What the field means, for the OpenAPI schema and the docs.
    description: str = ""

    @property
    def is_template(self) -> bool:
        """Whether the value's strings are Liquid templates rendered against the context
        (every kind but numbers, durations, names, conditions and the HTTP method)."""
        return self.kind in TEMPLATE_KINDS


TEMPLATE_KINDS = frozenset(
    {
        "template",
        "html_template",
        "template_list",
        "template_object",
        "recipients",
        "webhook_url",
        "link",
    }
)

_RETRY = FieldSpec(
    False,
    "retry_policy",
    "This node's retry policy for transient provider failures, instead of the "
    "NOTIFYFLOW_MAX_RETRIES / NOTIFYFLOW_RETRY_BASE_DELAY_S defaults.",
)

_SEND_WINDOW = FieldSpec(
    False,
    "send_window",
    'Send only on these local weekdays between from and until ("HH:MM"; until <= from '
    'wraps midnight), in timezone ("recipient": the recipient\'s, else UTC; or an IANA '
    "name). Outside it the step is deferred until the window opens.",
)
_EXPIRES_AFTER = FieldSpec(
    False,
    "window",
    "Skip the send (skip reason expired) when a send window or quiet hours would defer it "
    'past this long after the node was reached ("15m", "PT1H", ...; more than 0).',
)

NODE_CONFIG_SPECS: dict[str, dict[str, FieldSpec]] = {
    "email": {
        "to": FieldSpec(
            False,
            "recipients",
            "Recipient: a template rendering to exactly one email address, or a list of "
            "such templates (one address each). Optional: without it, the instance's "
            "recipient's email (`{{ recipient.email }}`); an instance with neither fails.",
        ),
        "subject": FieldSpec(True, "template", "Subject line (template)."),
        "body": FieldSpec(True, "template", "Plain-text body (template)."),
        "html_body": FieldSpec(
            False, "html_template", "HTML body (template; values are HTML-escaped)."
        ),
        "from_email": FieldSpec(
            False, "template", "Sender (template); DEFAULT_FROM_EMAIL when omitted."
        ),
        "reply_to": FieldSpec(
            False, "recipients", "Reply-To: one address template or a list of them."
        ),
        "retry": _RETRY,
        "send_window": _SEND_WINDOW,
        "expires_after": _EXPIRES_AFTER,
    },
    "sms": {
        "to": FieldSpec(
            False,
            "template",
            "Recipient: a template rendering to one E.164 phone number. Optional: without "
            "it, the instance's recipient's phone (`{{ recipient.phone }}`); an instance "
            "with neither fails.",
        ),
        "body": FieldSpec(True, "template", "Message text (template); must not render empty."),
        "retry": _RETRY,
        "send_window": _SEND_WINDOW,
        "expires_after": _EXPIRES_AFTER,
    },
    "delay": {
        "delay_ms": FieldSpec(False, "int", "Wait this many milliseconds."),
        "duration": FieldSpec(
            False, "duration", 'Wait this long: "90s", "15m", "2h", "1d", "1h30m" or "PT15M".'
        ),
        "until": FieldSpec(
            False,
            "template",
            "Wait until this instant: a template rendering to an ISO-8601 timestamp "
            "(a past instant continues at once).",
        ),
    },
    "wait": {
        "event": FieldSpec(True, "name", "Name of the event to wait for."),
        "timeout": FieldSpec(False, "duration", 'Give up after this long ("24h", "PT30M", ...).'),
        "timeout_ms": FieldSpec(False, "int", "Give up after this many milliseconds."),
        "match": FieldSpec(
            False,
            "condition",
            "Liquid expression an event must satisfy, over the context plus `event` "
            "({name, event_id, context, received_at}), e.g. "
            "`event.context.order_id == payload.order_id`.",
        ),
    },
    "emit": {
        "event": FieldSpec(True, "template", "Name of the event to raise (template)."),
        "subjects": FieldSpec(
            False,
            "template_list",
            "Subjects (templates): running instances with an equal interest receive it.",
        ),
        "context": FieldSpec(
            False,
            "template_object",
            "The event's context; string values are templates. Default: the payload.",
        ),
        "event_id": FieldSpec(
            False, "template", "Event id (template). Default: `<instance id>:<node id>`."
        ),
    },
    "webhook": {
        "url": FieldSpec(
            True,
            "webhook_url",
            "http(s) URL whose host is literal and listed in NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS; "
            "the path and query may be templates.",
        ),
        "method": FieldSpec(False, "http_method", "HTTP method (default POST)."),
        "body": FieldSpec(True, "template_object", "JSON body sent; string values are templates."),
        "headers": FieldSpec(
            False, "template_object", "Extra request headers; values are templates."
        ),
        "retry": _RETRY,
    },
    # --- throttle (SPEC §13) ---
    "throttle": {
        "limit": FieldSpec(
            True,
            "throttle_limit",
            f"At most this many instances pass within the window (1-{MAX_THROTTLE_LIMIT:,}).",
        ),
        "window": FieldSpec(
            True,
            "window",
            'The sliding window: "1h", "1d", "PT30M", ... (as for delay; more than 0).',
        ),
        "key": FieldSpec(
            False,
            "template",
            "What is counted apart (template, at most 255 characters rendered), e.g. "
            "`{{ payload.account_id }}`. Default: one counter.",
        ),
        "scope": FieldSpec(
            False,
            "throttle_scope",
            '"workflow" (default): this node of this workflow counts its instances; '
            "\"recipient\": the instance's recipient is counted across every workflow's "
            "throttle nodes with the same key.",
        ),
        "on_limit": FieldSpec(
            False,
            "throttle_on_limit",
            '"skip" (default): the instance ends here, completed, its step skipped with '
            '`throttled`; "defer": it waits (holding no worker) until the window has room.',
        ),
    },
    # Gates (SPEC §13): batch.
    "batch": {
        "window": FieldSpec(
            True,
            "window",
            'How long a batch stays open after its first arrival ("1m", "1h", "PT10M"; more '
            "than 0).",
        ),
        "key": FieldSpec(
            False,
            "template",
            'Batch key (template, default ""): one open batch per workflow, node, '
            "recipient and rendered key (at most 255 characters).",
        ),
        "max_items": FieldSpec(
            False,
            "batch_max_items",
            f"Close the batch at once when it holds this many items ({BATCH_MIN_ITEMS}-"
            f"{BATCH_MAX_ITEMS}).",
        ),
    },
    # The in-app feed (SPEC §14).
    "in_app": {
        "title": FieldSpec(True, "template", "The item's title (template); must not render empty."),
        "body": FieldSpec(True, "template", "The item's text (template)."),
        "url": FieldSpec(
            False,
            "link",
            "Where the item leads when clicked (template): an http(s) URL or a relative path "
            "(`javascript:`, `data:` and any other scheme are refused).",
        ),
        "category": FieldSpec(
            False, "name", "The item's category; default: the workflow's first category."
        ),
        "data": FieldSpec(
            False,
            "template_object",
            "Anything else the front end shows (a JSON object; string values are templates).",
        ),
    },
}
NODE_DESCRIPTIONS: dict[str, str] = {
    "email": "Send an email through the configured email backend(s). Output in "
    "`vars.email_<node id>`: {message_id, to, subject, sent_at}.",
    "sms": "Send an SMS through the configured SMS backend(s). Output in "
    "`vars.sms_<node id>`: {message_id, to, sent_at}.",
    "delay": "Pause the instance (exactly one of delay_ms, duration, until); no worker "
    "is held while it waits.",
    "wait": "Wait for an event in the instance's inbox (including events that arrived "
    "earlier), at most until the timeout (exactly one of timeout, timeout_ms). Output in "
    "`vars.wait_<node id>`: {received, event}.",
    "emit": "Raise an event, processed like POST /api/v1/events/ once the step is "
    "recorded (never twice). Output in `vars.emit_<node id>`: {name, event_id, subjects}.",
    "webhook": "Call an allowed HTTP endpoint with a signed JSON body. Output in "
    "`vars.webhook_<node id>`.",
    "throttle": "Let at most `limit` instances through within a sliding `window`; the "
    "others end (skipped, `throttled`) or wait for room (`on_limit: defer`). Output in "
    "`vars.throttle_<node id>`: {throttled, count, limit, key}.",
    "batch": "Collect the instances reaching the node per recipient and key for a window: "
    "the first continues when it closes with `vars.batch_<node id>` = {batch_id, count, "
    "items, first, last, opened_at, closed_at}; the others end, skipped `batched`.",
    "in_app": "Write an item into the recipient's in-app feed (once per instance and node); "
    "the recipient's preferences apply (channel `in_app`), quiet hours and send windows do "
    "not. Without a recipient it is skipped (`missing_channel_data`). Output in "
    "`vars.in_app_<node id>`: {feed_item_id, title, category}.",
}
# Fields of which a node needs exactly one.
EXACTLY_ONE_OF: dict[str, tuple[str, ...]] = {
    "delay": ("delay_ms", "duration", "until"),
    "wait": ("timeout", "timeout_ms"),
}
MAX_INTERESTS = 20
MAX_RECIPIENTS = 50
MAX_NAME_LENGTH = 200
NODE_TYPES = tuple(NODE_CONFIG_SPECS)

RETRY_KEYS = ("max_retries", "base_delay_s", "max_delay_s", "jitter")
MAX_RETRY_DELAY_S = 7 * 24 * 3600
WEBHOOK_METHODS = ("POST", "PUT")
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
SEND_WINDOW_KEYS = ("days", "from", "until", "timezone")
# "HH:MM", 00:00-23:59.
TIME_OF_DAY_RE = re.compile(r"^([01][0-9]|2[0-3]):[0-5][0-9]$")
# --- throttle (SPEC §13) ---
# The values of each choice field kind, the first the default.
CHOICE_KINDS: dict[str, tuple[str, ...]] = {
    "throttle_scope": ("workflow", "recipient"),
    "throttle_on_limit": ("skip", "defer"),
}
