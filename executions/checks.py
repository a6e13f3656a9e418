"""Start-up checks of what sending needs (Django system checks, tagged ``database``:
``manage.py migrate`` and ``manage.py check --database default`` run them; a worker
logs them at start, ``worker_hooks``), and of the node types registered (every command
runs that one)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, register
from django.db import DatabaseError

from recipients.models import Recipient
from recipients.preferences import CHANNELS
from workflows.definition import node_types
from workflows.models import Workflow


def workflows_needing_public_url() -> list[str]:
    """Keys of the active, non-critical workflows with an email node, once recipients
    exist: their emails to recipients carry a List-Unsubscribe link under
    NOTIFYFLOW_PUBLIC_URL. None before the first recipient (payload-only installations,
    a fresh start: nothing would use the link)."""
    if not Recipient.objects.exists():
        return []
    rows = Workflow.objects.filter(is_active=True, critical=False).values_list(
        "key", "current_version__definition"
    )
    return sorted(
        key
        for key, definition in rows
        if any(node.get("type") == "email" for node in (definition or {}).get("nodes", []))
    )


@register(Tags.database)
def check_public_url(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[CheckMessage]:
    if settings.NOTIFYFLOW_PUBLIC_URL or not databases:
        return []
    try:
        keys = workflows_needing_public_url()
    except DatabaseError:  # not migrated yet: nothing to check
        return []
    if not keys:
        return []
    shown = ", ".join(keys[:5]) + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")
    return [
        Error(
            "NOTIFYFLOW_PUBLIC_URL is not set, but recipients exist and active non-critical "
            f"workflows send email ({shown}): every such email to a recipient needs it for "
            "its one-click unsubscribe link (List-Unsubscribe, RFC 8058), and fails "
            "without it",
            hint="set NOTIFYFLOW_PUBLIC_URL to the URL recipients reach this installation "
            "at (e.g. https://notify.example.com), or mark transactional workflows critical",
            id="notifyflow.E010",
        )
    ]


@register()
def check_node_channels(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """A node type's preference channel is one the recipients' preferences know: else no
    opt-out could ever reach its sends."""
    return [
        Error(
            f"node type {node_type.name!r} sends on the channel {node_type.channel!r}, which "
            f"recipient preferences do not know ({', '.join(CHANNELS)})",
            hint="declare one of those channels (NodeType.channel), or None for a node "
            "that sends to nobody",
            id="notifyflow.E011",
        )
        for node_type in node_types.all()
        if node_type.channel is not None and node_type.channel not in CHANNELS
    ]
