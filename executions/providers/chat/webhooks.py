"""Incoming webhooks of Slack, Microsoft Teams and Discord: one POST of JSON each, through
one kept-alive httpx client per process (HTTP/2 where the service offers it).

Bodies: Slack ``{text, blocks}``; Teams a message with one Adaptive Card (what Teams'
Workflows webhooks take, and the older Office 365 connectors too); Discord
``{content}`` with mentions disabled, so rendered text cannot ping ``@everyone``.

Classified by status: 2xx accepted; 404 and 410 dead (the webhook was deleted, or its
channel archived: remove the connection); 429 and 5xx transient, honouring
``Retry-After``; other 4xx permanent (a payload the service refuses), with the service's
error code when it gives one (Slack's ``invalid_payload``, Discord's numeric ``code``).

A URL whose host and port NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS does not allow is never
called (failed, ``host_not_allowed``; ``invalid_url``), whoever checked it before.
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
from django.conf import settings

from recipients.channel_inputs import chat_webhook_problem

from ..connections import clients, http_client, tracer
from ..targets import TargetOutcome, TargetResult, by_status, counted, unreachable
from .message import ChatMessage

PROVIDERS = ("slack", "msteams", "discord")
CLIENT = "chat_webhooks"
DISCORD_CONTENT_LIMIT = 2000
SLACK_CODE = re.compile(r"[a-z0-9_]{1,100}")


def build() -> httpx.Client:
    return http_client(timeout_s=settings.NOTIFYFLOW_CHAT_TIMEOUT_S)


def webhook_body(provider: str, message: ChatMessage) -> dict[str, Any]:
    """What ``provider``'s incoming webhook takes."""
    if provider == "slack":
        body: dict[str, Any] = {"text": message.text}
        if message.blocks:
            body["blocks"] = [dict(block) for block in message.blocks]
        return body
    if provider == "msteams":
        card = {
            "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
            "type": "AdaptiveCard",
            "version": "1.4",
            "body": [{"type": "TextBlock", "text": message.text, "wrap": True}],
        }
        return {
            "type": "message",
            "attachments": [
                {"contentType": "application/vnd.microsoft.card.adaptive", "content": card}
            ],
        }
    # Discord refuses content over 2000 characters (400, code 50035).
    return {
        "content": message.text[:DISCORD_CONTENT_LIMIT],
        "allowed_mentions": {"parse": []},
    }


def post(*, provider: str, url: str, message: ChatMessage) -> TargetResult:
    """POST ``message`` to an incoming webhook of ``provider`` (slack, msteams,
    discord); never raises for what the service answers or for a lost connection."""
    if provider not in PROVIDERS:
        return TargetResult(TargetOutcome.FAILED, provider, code="unknown_provider")
    # Checked when the connection was saved, and again here (the allow-list may have
    # changed; a node's fixed URL was checked only at the definition's save).
    problem = chat_webhook_problem(url)
    if problem is not None:
        return counted(
            TargetResult(TargetOutcome.FAILED, provider, code=problem[0], detail=problem[1])
        )
    client = clients.get(CLIENT, build)
    try:
        response = client.post(
            url,
            content=json.dumps(webhook_body(provider, message)).encode(),
            headers={"Content-Type": "application/json"},
            extensions={"trace": tracer(provider)},
        )
    except httpx.HTTPError as exc:
        return counted(unreachable(provider, exc))
    return counted(classify(provider, response))


def classify(provider: str, response: httpx.Response) -> TargetResult:
    if response.is_success:
        return TargetResult(TargetOutcome.ACCEPTED, provider)
    return by_status(
        provider,
        response.status_code,
        code=error_code(provider, response),
        retry_after=response.headers.get("Retry-After"),
        detail=response.text[:300],
        dead=frozenset({404, 410}),
    )


def error_code(provider: str, response: httpx.Response) -> str:
    """The service's error code: Slack answers one word (``no_service``,
    ``channel_is_archived``), Discord JSON with a numeric ``code`` (0, its "general
    error", says nothing: then the status is the code); "" otherwise."""
    if provider == "slack":
        text = response.text.strip()
        return text if SLACK_CODE.fullmatch(text) else ""
    if provider == "discord":
        try:
            code = response.json().get("code")
        except (ValueError, AttributeError):
            return ""
        return str(code) if isinstance(code, int) and code else ""
    return ""
