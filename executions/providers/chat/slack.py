"""Slack through the Web API: ``chat.postMessage`` with the bot token
(``NOTIFYFLOW_SLACK_BOT_TOKEN``), to a channel id or a user id (a direct message from the
app), text and Block Kit ``blocks``; ``slack_sdk``'s ``WebClient``, pointed at
``NOTIFYFLOW_SLACK_API_URL``.

Classified by Slack's ``error`` code and the HTTP status: ``ratelimited`` (429, with
``Retry-After``) and 5xx are transient; every other error - ``channel_not_found``,
``is_archived``, ``not_in_channel``, ``invalid_auth``, ``invalid_blocks``, ... - is
permanent for the message, and the connection is kept (a bot removed from a channel can be
invited back). The client retries nothing itself (``retry_handlers=[]``): a retry is the
engine's, with its backoff and its attempt rows.

``slack_sdk``'s synchronous client is built on ``urllib``, which opens a connection per
call: Slack allows about one message per second per channel, so this is not the push
providers' volume; each call is counted in ``notifyflow_provider_connections_total``.
"""

from __future__ import annotations

import math
import re
from http.client import HTTPException
from typing import Any

from django.conf import settings

from ..base import ProviderError
from ..connections import clients, connection_opened, tls_context
from ..targets import (
    TargetOutcome,
    TargetResult,
    by_status,
    counted,
    not_configured,
    retry_after_seconds,
    unreachable,
)
from .message import ChatMessage

PROVIDER = "slack"
ERROR_CODE = re.compile(r"[a-z0-9_]+")
TRANSIENT_ERRORS = frozenset(
    {"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)


def build() -> Any:
    """The ``WebClient`` (``slack_sdk.WebClient``); ProviderError without a bot token."""
    from slack_sdk import WebClient

    if not settings.NOTIFYFLOW_SLACK_BOT_TOKEN:
        raise ProviderError("NOTIFYFLOW_SLACK_BOT_TOKEN is not set", permanent=True)
    return WebClient(
        token=settings.NOTIFYFLOW_SLACK_BOT_TOKEN,
        base_url=settings.NOTIFYFLOW_SLACK_API_URL,
        timeout=math.ceil(settings.NOTIFYFLOW_CHAT_TIMEOUT_S),  # whole seconds, its type says
        ssl=tls_context(),
        retry_handlers=[],
    )


def post_message(*, channel: str, message: ChatMessage) -> TargetResult:
    """``chat.postMessage`` to ``channel`` (a channel id, or a user id for a direct
    message); never raises for what Slack answers or for a lost connection."""
    from slack_sdk.errors import SlackApiError

    try:
        client = clients.get(PROVIDER, build)
    except ProviderError as exc:
        return counted(not_configured(PROVIDER, exc))
    arguments: dict[str, Any] = {"channel": channel, "text": message.text}
    if message.blocks:
        arguments["blocks"] = [dict(block) for block in message.blocks]
    try:
        response = client.chat_postMessage(**arguments)
    except SlackApiError as exc:
        connection_opened(PROVIDER)
        answer = exc.response
        return counted(classify(answer.status_code, answer.data, answer.headers))
    except (OSError, HTTPException) as exc:
        return counted(unreachable(PROVIDER, exc))
    connection_opened(PROVIDER)
    posted_in = str(response.get("channel") or channel)
    return counted(
        TargetResult(
            TargetOutcome.ACCEPTED,
            PROVIDER,
            provider_message_id=f"{posted_in}:{response.get('ts') or ''}",
        )
    )


def classify(status: int, data: Any, headers: Any) -> TargetResult:
    """Slack's refusal of a call, by its ``error`` code and HTTP status."""
    error = str(data.get("error") or "") if isinstance(data, dict) else ""
    if not ERROR_CODE.fullmatch(error):
        # A body that is not Slack's JSON gets slack_sdk's own sentence in "error".
        error = ""
    retry_after = header(headers, "Retry-After")
    if status == 429 or error in TRANSIENT_ERRORS:
        return TargetResult(
            TargetOutcome.RETRY,
            PROVIDER,
            code=error or str(status),
            retry_after_s=retry_after_seconds(retry_after),
        )
    if status == 200:  # {"ok": false, "error": ...}: Slack's answer, permanent
        return TargetResult(TargetOutcome.FAILED, PROVIDER, code=error or "unknown_error")
    return by_status(PROVIDER, status, code=error, retry_after=retry_after)


def header(headers: Any, name: str) -> str | None:
    """A response header by name, whatever its case (slack_sdk keeps the server's)."""
    for key, value in (headers or {}).items():
        if key.lower() == name.lower():
            return str(value[0] if isinstance(value, list) else value)
    return None
