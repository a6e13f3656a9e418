"""``webhook``: call an allowed HTTP endpoint with a signed JSON body (docs/workflows.md#webhook).

The body is the node's ``body`` object with its string values rendered; the request is
signed ``X-NotifyFlow-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw
body>">`` with NOTIFYFLOW_WEBHOOK_SECRET and carries ``X-NotifyFlow-Delivery:
<instance>:<node>`` for the receiver to deduplicate (a retry after an unknown outcome
sends the same delivery id). The host and port must be allowed by
NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS (``host`` allows 80 and 443, ``host:port`` that port), at
save and again here; redirects are never followed. 5xx, 408, 429, timeouts and
connection errors are transient, any other non-2xx permanent. Guarded like every send:
once recorded sent, never called again.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx
from django.conf import settings

from workflows.definition import (
    RETRY_FIELD,
    Drawing,
    FieldSpec,
    NodeType,
    node_types,
    webhook_host_allowed,
    webhook_url_port,
)

from ..deliveries import guarded_send
from ..providers.base import ProviderError
from ..providers.failover import ProviderSpec, send_with_failover
from ..step import NodeResult, StepContext
from .emit import _render_value

BODY_LIMIT = 2048
_client: httpx.Client | None = None
_client_lock = threading.Lock()


def _http() -> httpx.Client:
    global _client
    with _client_lock:
        if _client is None:
            _client = httpx.Client(follow_redirects=False, trust_env=False)
        return _client


def signature_header(secret: str, timestamp: int, body: bytes) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={digest.hexdigest()}"


def check_url(url: str) -> str:
    """The rendered URL's host, if http(s) and its host and port are allowed; else a
    permanent error (as is a control character rendered into it: retrying cannot fix the
    URL, and ``urlsplit`` would silently drop CR, LF and tab)."""
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in url):
        raise ProviderError(f"url: {url!r} contains a control character", permanent=True)
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.scheme not in ("http", "https") or not host:
        raise ProviderError(f"url: {url!r} is not an http(s) URL", permanent=True)
    try:
        port = webhook_url_port(parts.scheme, parts.port)
    except ValueError as exc:
        raise ProviderError(f"url: {url!r} has an invalid port", permanent=True) from exc
    if not webhook_host_allowed(host, port=port):
        raise ProviderError(
            f"url: host {host!r} port {port} is not allowed by NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS",
            permanent=True,
        )
    return host


def render_request(step: StepContext) -> dict[str, Any]:
    """What the node would send: url, method, body and headers, rendered."""
    config = step.config
    headers = _render_value(config.get("headers", {}), step, "headers")
    return {
        "url": step.render("url").strip(),
        "method": config.get("method", "POST"),
        "body": _render_value(config["body"], step, "body"),
        "headers": {str(k): str(v) for k, v in headers.items()},
    }


def execute(step: StepContext) -> NodeResult:
    request = render_request(step)
    host = check_url(request["url"])
    secret = settings.NOTIFYFLOW_WEBHOOK_SECRET
    if not secret and not step.preview:
        raise ProviderError("NOTIFYFLOW_WEBHOOK_SECRET is not set", permanent=True)
    raw = json.dumps(request["body"], separators=(",", ":"), sort_keys=True).encode()

    def call(provider: ProviderSpec) -> dict[str, Any]:
        timestamp = int(time.time())
        headers = {
            **request["headers"],
            "Content-Type": "application/json",
            "X-NotifyFlow-Signature": signature_header(secret, timestamp, raw),
            "X-NotifyFlow-Delivery": step.idempotency_key,
        }
        try:
            response = _http().request(
                request["method"],
                request["url"],
                content=raw,
                headers=headers,
                timeout=settings.NOTIFYFLOW_WEBHOOK_TIMEOUT_S,
            )
        except httpx.TimeoutException as exc:
            raise ProviderError(f"webhook timeout: {exc}", permanent=False) from exc
        except (httpx.LocalProtocolError, httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            # What we would send is invalid (e.g. CR/LF rendered into a header): the
            # same request fails the same way every time.
            raise ProviderError(f"webhook request invalid: {exc}", permanent=True) from exc
        except httpx.TransportError as exc:
            raise ProviderError(f"webhook connection error: {exc}", permanent=False) from exc
        body = response.text[:BODY_LIMIT]
        status = response.status_code
        if 200 <= status < 300:
            return {"status": status, "body": body}
        transient = status >= 500 or status in (408, 429)
        raise ProviderError(f"webhook {status}: {body[:200]}", permanent=not transient)

    def send() -> dict[str, Any]:
        return send_with_failover(
            channel="webhook",
            providers=[ProviderSpec(name=host, backend="httpx")],
            call=call,
            message_id=lambda result: "",
        )

    # The recipient of a webhook is its target host (searchable like an address).
    output = guarded_send(step=step, channel=NODE.name, recipient=host, send=send)
    return NodeResult(output=output, vars_key=NODE.vars_key(step.node_id))


def summary(config: Mapping[str, Any]) -> str:
    return f"{config.get('method', 'POST')} {config.get('url', '')}"


NODE = node_types.register(
    NodeType(
        name="webhook",
        description="Call an allowed HTTP endpoint with a signed JSON body. Output in "
        "`vars.webhook_<node id>`.",
        fields={
            "url": FieldSpec(
                True,
                "webhook_url",
                "http(s) URL whose host is literal and listed in "
                "NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS; the path and query may be templates.",
            ),
            "method": FieldSpec(False, "http_method", "HTTP method (default POST)."),
            "body": FieldSpec(
                True, "template_object", "JSON body sent; string values are templates."
            ),
            "headers": FieldSpec(
                False, "template_object", "Extra request headers; values are templates."
            ),
            "retry": RETRY_FIELD,
        },
        run=execute,
        drawing=Drawing(colour="#a33a5b", summary=summary),
    )
)
