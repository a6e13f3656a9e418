"""One push notification, rendered, as every push provider takes it: each builds its own
payload from it (FCM's ``message``, APNs' ``aps``, Web Push's encrypted JSON)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class PushMessage:
    """``ttl``: seconds a provider keeps the message for an offline device (None: the
    provider's default; 0: now or never). ``collapse_key``: a newer message with the same
    key replaces an undelivered older one. ``data``: extra key/values for the app."""

    title: str = ""
    body: str = ""
    url: str = ""
    data: Mapping[str, Any] = field(default_factory=dict)
    badge: int | None = None
    sound: str = ""
    ttl: int | None = None
    collapse_key: str = ""

    @property
    def is_alert(self) -> bool:
        """Whether it shows something (a title or a body), or is data only."""
        return bool(self.title or self.body)

    def data_strings(self) -> dict[str, str]:
        """``data`` (and ``url``) as FCM needs them: string values, others as JSON."""
        strings = {
            str(key): value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
            for key, value in self.data.items()
        }
        if self.url:
            strings.setdefault("url", self.url)
        return strings
