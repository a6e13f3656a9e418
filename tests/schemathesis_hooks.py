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
   (``WEBHOOK_URL``, allowed by the fuzz test) and its workflows exist. Only positive
   cases are mapped: negative ones must stay invalid.
3. The in-app feed's operations take a recipient token, not the run's API key: every
   case of theirs carries the token the test minted (``NOTIFYFLOW_FUZZ_FEED_TOKEN``).
"""

from __future__ import annotations

import os
from base64 import b64encode
from typing import Any
from urllib.parse import urlencode

import schemathesis
from hypothesis import strategies as st

from notifyflow.pagination import CURSOR_FORMAT

# The workflow and the recipient list the fuzz test creates.
WORKFLOW = os.environ.get("NOTIFYFLOW_FUZZ_WORKFLOW", "welcome")
RECIPIENT_LIST = "readers"
# An allowed webhook endpoint URL (tests/api/test_fuzz.py allows its host).
WEBHOOK_HOST = "hooks.example.com"
WEBHOOK_URL = f"https://{WEBHOOK_HOST}/notifyflow"
FEED_TOKEN = os.environ.get("NOTIFYFLOW_FUZZ_FEED_TOKEN", "")


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
    if FEED_TOKEN and case.operation.path.startswith("/api/v1/feed/"):
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {FEED_TOKEN}"}
    if not negative and case.operation.path == "/api/v1/throttles/":
        _throttle_query(case)
    if negative or not isinstance(case.body, dict):
        return case
    path, method = case.operation.path, case.method.upper()
    body = case.body
    if path.startswith("/api/v1/workflows/") and "definition" in body:
        body["definition"] = DEFINITION
        if method == "PUT":
            body["key"] = case.path_parameters.get("key", body.get("key"))
    elif path.startswith("/api/v1/webhook-endpoints/"):
        if isinstance(body.get("url"), str):
            body["url"] = WEBHOOK_URL
        if isinstance(body.get("workflows"), list):
            body["workflows"] = [WORKFLOW] if body["workflows"] else []
    elif path == "/api/v1/triggers/bulk/" and isinstance(body.get("items"), list):
        for item in body["items"]:
            if isinstance(item, dict):
                _existing_workflow(item)
    else:
        _existing_workflow(body)
        if "idempotency_setting" in body:
            body["idempotency_setting"] = {"strategy": "TIME_WINDOW", "ttlMinutes": 60}
    return case
