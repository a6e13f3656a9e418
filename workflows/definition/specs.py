"""What a node's config may hold: each field's kind and meaning (``FieldSpec``: the
validator, the JSON Schema and the docs read them), the fields several node types share,
and the limits. The node types themselves declare their fields (``node_types``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

NODE_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True)
class FieldSpec:
    required: bool
    # "template" | "html_template" | "int" (milliseconds, bounded) | "duration" |
    # "window" (a duration > 0: a gate's window, an expiry) | "link" (a template of a URL
    # shown to a person: http(s) or a relative path, definition/links.py) | "name"
    # (a plain non-empty string) | "condition" (a Liquid expression) | "template_list" |
    # "template_object" | "template_object_list" (a JSON array of objects: Slack's
    # blocks) | "recipients" (one address template, or a JSON list of them:
    # each renders to exactly one address, never split) | "retry_policy" |
    # "http_method" | "webhook_url" | "send_window" ({days, from, until, timezone}) |
    # "schedule" ({cron, timezone}: definition/schedule.py) |
    # "integer" (from ``minimum`` to ``maximum``) | "choice" (one of ``choices``, the
    # first the default)
    kind: str
    # What the field means, for the OpenAPI schema and the docs.
    description: str = ""
    minimum: int = 0
    maximum: int = 0
    choices: tuple[str, ...] = ()

    @property
    def is_template(self) -> bool:
        """Whether the value's strings are Liquid templates rendered against the context
        (every kind but numbers, durations, names, conditions and the HTTP method)."""
        return self.kind in TEMPLATE_KINDS


@dataclass(frozen=True)
class ExactlyOneOf:
    """Of ``fields`` a node needs exactly one. The problem names the config itself, or
    the field ``at`` inside it, with ``code`` (clients match on it)."""

    fields: tuple[str, ...]
    code: str = "invalid_definition"
    at: str = ""


TEMPLATE_KINDS = frozenset(
    {
        "template",
        "html_template",
        "template_list",
        "template_object",
        "template_object_list",
        "recipients",
        "webhook_url",
        "link",
    }
)

# Fields several node types have (the sending ones).
RETRY_FIELD = FieldSpec(
    False,
    "retry_policy",
    "This node's retry policy for transient provider failures, instead of the "
    "NOTIFYFLOW_MAX_RETRIES / NOTIFYFLOW_RETRY_BASE_DELAY_S defaults.",
)

SEND_WINDOW_FIELD = FieldSpec(
    False,
    "send_window",
    'Send only on these local weekdays between from and until ("HH:MM"; until <= from '
    'wraps midnight), in timezone ("recipient": the recipient\'s, else UTC; or an IANA '
    "name). Outside it the step is deferred until the window opens.",
)
EXPIRES_AFTER_FIELD = FieldSpec(
    False,
    "window",
    "Skip the send (skip reason expired) when a send window or quiet hours would defer it "
    'past this long after the node was reached ("15m", "PT1H", ...; more than 0).',
)

MAX_INTERESTS = 20
MAX_RECIPIENTS = 50
MAX_NAME_LENGTH = 200

RETRY_KEYS = ("max_retries", "base_delay_s", "max_delay_s", "jitter")
MAX_RETRY_DELAY_S = 7 * 24 * 3600
WEBHOOK_METHODS = ("POST", "PUT")
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
SEND_WINDOW_KEYS = ("days", "from", "until", "timezone")
# "HH:MM", 00:00-23:59.
TIME_OF_DAY_RE = re.compile(r"^([01][0-9]|2[0-3]):[0-5][0-9]$")
