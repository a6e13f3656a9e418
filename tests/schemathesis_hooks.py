"""Schemathesis hooks for the contract check (tests/api/test_fuzz.py loads them through
SCHEMATHESIS_HOOKS).

1. How to make a value of the API's own string formats: ``cursor`` is opaque, only a
   value from a list's ``next`` or ``previous`` link is valid (anything else is
   documented as 400 ``invalid_cursor``); valid ones are generated the way DRF's
   CursorPagination encodes them (an offset and a direction, no position).
2. What no JSON Schema can say, supplied as test data (schemathesis' advice for
   identifiers): a schema-valid request names an existing workflow (an unknown one is
   400 ``unknown_workflow`` by contract; an unknown list in ``recipients`` is 400
   ``unknown_list`` likewise), a PUT's body key matches its URL, a workflow
   definition is a valid graph (its rules - references between nodes and edges,
   templates - are checked at save), and an idempotency setting obeys the rules across
   its options (a window strategy needs ttlMinutes, ...), a throttle filter names a
   subject of its scope, and a webhook endpoint's URL is on the allow-list
   (``WEBHOOK_URL``, allowed by the fuzz test) and its workflows exist, a replay's
   ``until`` is not before its ``since`` and quiet hours' ``until`` is not their
   ``from`` (each a 400 naming ``until``), and channel data's URLs (a Web Push
   endpoint, a chat webhook) are on their allow-lists (``host_not_allowed``); the
   channel-data operations and a test send name a recipient the test made, a sync names
   each workflow once (a test send,
   the run's workflow: one a generated sync made may be inactive, 400
   ``inactive_workflow``); a catalogue's messages nest no empty object (400
   ``invalid_messages``: ``MESSAGES``); a locale is one Babel knows
   (``LOCALE``; an unknown one is 400 ``invalid_locale``), and a sync never prunes (it
   would deactivate the run's workflow, after which every trigger of it is 400
   ``inactive_workflow`` by contract). Only positive cases are mapped: negative ones must
   stay invalid.
3. An operation on one batch, fan-out or instance names the one the test made
   (``NOTIFYFLOW_FUZZ_OBJECTS``) in a positive case, so it reaches more than its 404.

(The in-app feed's operations take a recipient token, not the run's API key: the test
gives them theirs in schemathesis' configuration, per operation - a header set here
would be overridden by the run's ``--header``.)
"""

from __future__ import annotations

import json
import os
from base64 import b64encode
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import schemathesis
from hypothesis import strategies as st

from api.pagination import CURSOR_FORMAT

# The workflow and the recipient list the fuzz test creates.
WORKFLOW = os.environ.get("NOTIFYFLOW_FUZZ_WORKFLOW", "welcome")
RECIPIENT_LIST = "readers"
# An allowed webhook endpoint URL (tests/api/test_fuzz.py allows its host).
WEBHOOK_HOST = "hooks.example.com"
WEBHOOK_URL = f"https://{WEBHOOK_HOST}/notifyflow"
# Path prefix -> the id of the object the test made there.
OBJECTS: dict[str, str] = json.loads(os.environ.get("NOTIFYFLOW_FUZZ_OBJECTS") or "{}")
# A Web Push endpoint on the default NOTIFYFLOW_WEBPUSH_ALLOWED_HOSTS.
WEBPUSH_ENDPOINT = "https://fcm.googleapis.com/fcm/send/fuzz"
# The recipient whose channel data the channel-data operations reach in a positive case
# (the test makes it; not the feed's reader, whom no generated DELETE may erase).
CHANNEL_DATA_RECIPIENT = "fuzz-channels"


# A locale Babel knows, for every field and path parameter that names one.
LOCALE = "fr"
LOCALE_FIELDS = ("locale", "default_locale")
MESSAGES = {"greeting": "Bonjour", "order": {"shipped": {"one": "# colis", "other": "# colis"}}}
# A valid definition (tests.factories needs Django's apps loaded; this module loads first).
DEFINITION = {
    "entry_node_id": "hello",
    "nodes": [
        {
            "id": "hello",
            "type": "email",
            "config": {"to": "{{ payload.email }}", "subject": "Hi", "body": "Hello"},
        }
    ],
    "edges": [],
}


def _cursor(offset: int, reverse: bool) -> str:
    tokens = {"o": str(offset)} if offset else {}
    if reverse:
        tokens["r"] = "1"
    return b64encode(urlencode(tokens).encode("ascii")).decode("ascii")


schemathesis.openapi.format(
    CURSOR_FORMAT, st.builds(_cursor, st.integers(min_value=0, max_value=50), st.booleans())
)


def _existing_workflow(body: dict[str, Any]) -> None:
    if isinstance(body.get("workflow"), str):
        body["workflow"] = WORKFLOW
    for entry in body.get("recipients") if isinstance(body.get("recipients"), list) else ():
        if isinstance(entry, dict) and isinstance(entry.get("list"), str):
            entry["list"] = RECIPIENT_LIST
        if isinstance(entry, dict) and isinstance(entry.get("channel_data"), dict):
            for channel in entry["channel_data"].values():
                if isinstance(channel, dict):
                    _allowed_channel_urls(channel)


def _allowed_channel_urls(body: dict[str, Any]) -> None:
    """Channel data's URLs on their allow-lists (``host_not_allowed`` otherwise): a Web
    Push endpoint (a device, or a body's ``devices``) and a chat ``webhook_url`` (a
    body's ``connections``)."""
    devices = body.get("devices") if isinstance(body.get("devices"), list) else [body]
    for device in devices:
        token = device.get("token") if isinstance(device, dict) else None
        if isinstance(token, dict) and isinstance(token.get("endpoint"), str):
            token["endpoint"] = WEBPUSH_ENDPOINT
    connections = body.get("connections")
    for connection in connections if isinstance(connections, list) else ():
        if isinstance(connection, dict) and isinstance(connection.get("webhook_url"), str):
            connection["webhook_url"] = WEBHOOK_URL


def _replay_range(body: dict[str, Any]) -> None:
    """``until`` before ``since`` is 400 ``invalid_range``: the two in order."""
    try:
        since, until = _instant(body["since"]), _instant(body["until"])
    except (KeyError, TypeError, ValueError):  # one left out or null: nothing to order
        return
    if until < since:
        body["since"], body["until"] = body["until"], body["since"]


def _instant(text: str) -> datetime:
    value = datetime.fromisoformat(text)
    return value if value.tzinfo else value.replace(tzinfo=UTC)  # as the API reads it


def _quiet_hours(body: dict[str, Any]) -> None:
    """Quiet hours from a time until the same time are 400 ``empty_window``."""
    hours = body.get("quiet_hours")
    if isinstance(hours, dict) and hours.get("from") == hours.get("until") is not None:
        hours["until"] = "00:00" if hours["from"] != "00:00" else "01:00"


def _existing_object(case: Any) -> None:
    for prefix, object_id in OBJECTS.items():
        if case.operation.path.startswith(f"{prefix}{{id}}/"):
            case.path_parameters = {**(case.path_parameters or {}), "id": object_id}
    if case.operation.path.startswith("/api/v1/recipients/{id}/channel-data/"):
        case.path_parameters = {**(case.path_parameters or {}), "id": CHANNEL_DATA_RECIPIENT}
    if case.operation.path.startswith("/api/v1/translations/{locale}/"):
        case.path_parameters = {**(case.path_parameters or {}), "locale": LOCALE}
    if case.operation.path == "/api/v1/workflows/{key}/test/":
        case.path_parameters = {**(case.path_parameters or {}), "key": WORKFLOW}


def _throttle_query(case: Any) -> None:
    """The throttles' filters name a subject of their scope only: workflow= and node=
    with scope=workflow, recipient= with scope=recipient (else 400 ``scope_mismatch``)."""
    query = case.query if isinstance(case.query, dict) else None
    if not query:
        return
    if query.get("scope") == "workflow":
        query.pop("recipient", None)
    elif query.get("scope") == "recipient":
        query.pop("workflow", None)
        query.pop("node", None)


@schemathesis.hook
def map_case(context: Any, case: Any) -> Any:
    meta = case.meta
    # No meta: an example from the schema itself (examples are valid by definition).
    negative = meta is not None and not meta.generation.mode.is_positive
    if negative:
        return case
    if case.operation.path == "/api/v1/throttles/":
        _throttle_query(case)
    _existing_object(case)
    if isinstance(case.body, dict):
        _positive_body(case, case.body)
    return case


def _known_locales(body: dict[str, Any]) -> None:
    for field in LOCALE_FIELDS:
        if isinstance(body.get(field), str):
            body[field] = LOCALE


def _synced_workflows(body: dict[str, Any]) -> None:
    body["prune"] = False
    specs = body.get("workflows") if isinstance(body.get("workflows"), list) else []
    for index, spec in enumerate(specs):
        if isinstance(spec, dict):
            # One spec per key (a key twice is 400 duplicate_key, which no schema says).
            if isinstance(spec.get("key"), str):
                spec["key"] = f"fuzz-synced-{index}"
            _known_locales(spec)
            if "definition" in spec:
                spec["definition"] = DEFINITION


def _authoring_body(path: str, body: dict[str, Any]) -> bool:
    """A sync's, a test send's or a catalogue's body made valid; False for other paths."""
    if path == "/api/v1/workflows/sync/":
        _synced_workflows(body)
    elif path == "/api/v1/workflows/{key}/test/":
        body["recipient_id"] = CHANNEL_DATA_RECIPIENT
    elif path.startswith("/api/v1/translations/") and "messages" in body:
        body["messages"] = MESSAGES
    else:
        return False
    return True


def _positive_body(case: Any, body: dict[str, Any]) -> None:
    path, method = case.operation.path, case.method.upper()
    _known_locales(body)
    if _authoring_body(path, body):
        return
    if path.startswith("/api/v1/workflows/") and "definition" in body:
        body["definition"] = DEFINITION
        if method == "PUT":
            body["key"] = case.path_parameters.get("key", body.get("key"))
    elif path.endswith("/replay/"):
        _replay_range(body)
    elif path.startswith("/api/v1/webhook-endpoints/"):
        if isinstance(body.get("url"), str):
            body["url"] = WEBHOOK_URL
        if isinstance(body.get("workflows"), list):
            body["workflows"] = [WORKFLOW] if body["workflows"] else []
    elif path.endswith("/preferences/"):
        _quiet_hours(body)
    elif "/channel-data/" in path:
        _allowed_channel_urls(body)
    elif path == "/api/v1/triggers/bulk/" and isinstance(body.get("items"), list):
        for item in body["items"]:
            if isinstance(item, dict):
                _existing_workflow(item)
    else:
        _existing_workflow(body)
        if "idempotency_setting" in body:
            body["idempotency_setting"] = {"strategy": "TIME_WINDOW", "ttlMinutes": 60}
