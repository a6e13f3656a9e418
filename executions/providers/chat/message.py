"""One chat message, rendered, as every chat provider takes it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ChatMessage:
    """``text``: Slack mrkdwn (the fallback text when there are ``blocks``; the message
    itself on Teams and Discord). ``blocks``: Slack Block Kit, used by Slack only."""

    text: str
    blocks: Sequence[Mapping[str, Any]] = field(default_factory=tuple)
