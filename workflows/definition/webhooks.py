"""The webhook node's URL policy: which hosts and ports NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS
lets it call, checked when a definition is saved and again at send. The same policy,
over another allow-list, guards every URL the workers call that a caller gave them
(``url_problem``: chat webhooks, Web Push endpoints in ``recipients.channel_data``)."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

from workflows.templating import TemplateError, check_template

from .problems import DefinitionProblem

# Ports a bare allow-list entry (no ``:port``) lets the webhook node call: the web's.
WEBHOOK_DEFAULT_PORTS = frozenset({80, 443})


def webhook_host_allowed(
    host: str, *, port: int, allowed_hosts: Sequence[str] | None = None
) -> bool:
    """Whether NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS (or ``allowed_hosts``, another list of
    the same syntax) lets the webhook node call ``host`` on ``port`` (the URL's, or its
    scheme's default). An entry is ``host`` or ``*.example.com`` (subdomains), optionally
    with ``:port``: with a port it allows that port only; without, only 80 and 443 - so
    ``localhost`` does not open the database's or the broker's port. Checked at save and
    again at send."""
    host = host.lower().rstrip(".")
    entries = settings.NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS if allowed_hosts is None else allowed_hosts
    for entry in entries:
        parts = urlsplit(f"//{entry}")
        try:
            allowed_port = parts.port
        except ValueError:
            continue  # a malformed entry allows nothing
        allowed = (parts.hostname or "").rstrip(".")
        if not allowed:
            continue
        if allowed_port is None:
            port_allowed = port in WEBHOOK_DEFAULT_PORTS
        else:
            port_allowed = port == allowed_port
        if not port_allowed:
            continue
        if host == allowed or (allowed.startswith("*.") and host.endswith(allowed[1:])):
            return True
    return False


def webhook_url_port(scheme: str, port: int | None) -> int:
    """The port a URL of ``scheme`` with explicit ``port`` (or None) connects to."""
    return port if port is not None else (443 if scheme == "https" else 80)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine: ``localhost`` or a loopback address."""
    host = host.lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def url_problem(
    url: str,
    *,
    allowed_hosts: Sequence[str] | None = None,
    setting: str = "NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS",
    https_unless_loopback: bool = False,
) -> tuple[str, str] | None:
    """(code, problem) if a literal URL the workers would call is not allowed, else
    None: not an http(s) URL with a host (``invalid_url``: also a space or control
    character, user info, a bad port), plain ``http`` to a host that is not loopback when
    ``https_unless_loopback`` (``insecure_url``), or a host and port the allow-list
    ``allowed_hosts`` (default NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS; ``setting`` names it in
    the problem) does not allow (``host_not_allowed``). For a caller to check at save and
    the sender at send."""
    if any(ord(char) <= 0x20 or 0x7F <= ord(char) <= 0x9F for char in url):
        return "invalid_url", "spaces and control characters are not allowed"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or "@" in parts.netloc:
        return "invalid_url", "must be an http(s) URL with a host (and no user info)"
    try:
        port = webhook_url_port(parts.scheme, parts.port)
    except ValueError:
        return "invalid_url", "invalid port"
    if https_unless_loopback and parts.scheme == "http" and not is_loopback(parts.hostname):
        return "insecure_url", "must be https (http only to a loopback host)"
    if not webhook_host_allowed(parts.hostname, port=port, allowed_hosts=allowed_hosts):
        return (
            "host_not_allowed",
            f"host {parts.hostname!r} port {port} is not allowed by {setting} (an entry "
            "without :port allows 80 and 443)",
        )
    return None


def check_webhook_url(value: Any, path: str, node: str | None) -> list[DefinitionProblem]:
    """An http(s) URL whose scheme and host are literal (only the path and query may be
    templates), so the host is known at save and checked against the allow-list."""
    if not isinstance(value, str) or not value.strip():
        return [DefinitionProblem(path, "must be an http(s) URL", node=node, code="required")]
    try:
        check_template(value)
    except TemplateError as exc:
        return [
            DefinitionProblem(
                path, f"invalid Liquid template: {exc}", node=node, code="invalid_template"
            )
        ]
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return [DefinitionProblem(path, "must be an http(s) URL", node=node, code="invalid_url")]
    if "{" in parts.netloc or "@" in parts.netloc:
        return [
            DefinitionProblem(
                path,
                "the host must be literal text (no template, no user info)",
                node=node,
                code="invalid_url",
            )
        ]
    try:
        port = webhook_url_port(parts.scheme, parts.port)
    except ValueError:
        return [DefinitionProblem(path, "invalid port", node=node, code="invalid_url")]
    if not webhook_host_allowed(parts.hostname or "", port=port):
        return [
            DefinitionProblem(
                path,
                f"host {parts.hostname!r} port {port} is not allowed by "
                "NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS (an entry without :port allows 80 and 443)",
                node=node,
                code="host_not_allowed",
            )
        ]
    return []
