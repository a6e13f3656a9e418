"""What every provider raises: one error type, classified transient or permanent."""

from __future__ import annotations


class ProviderError(Exception):
    """A send failed. ``permanent`` errors are never retried (bad recipient, 4xx)."""

    def __init__(self, message: str, *, permanent: bool) -> None:
        super().__init__(message)
        self.permanent = permanent
