"""The webhook node's URL policy: which hosts and ports NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS
lets it call, checked when a definition is saved and again at send."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

from workflows.templating import TemplateError, check_template

from .problems import DefinitionProblem

# Ports a bare allow-list entry (no ``:port``) lets the webhook node call: the web's.
WEBHOOK_DEFAULT_PORTS = frozenset({80, 443})


def webhook_host_allowed(host: str, *, port: int) -> bool:
    """Whether NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS lets the webhook node call ``host`` on
    ``port`` (the URL's, or its scheme's default). An entry is ``host`` or
    ``*.example.com`` (subdomains), optionally with ``:port``: with a port it allows that
    port only; without, only 80 and 443 - so ``localhost`` does not open the database's
    or the broker's port. Checked at save and again at send."""
    host = host.lower().rstrip(".")
    for entry in settings.NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS:
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
