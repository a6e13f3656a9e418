"""What every provider raises: one error type, classified transient or permanent."""

from __future__ import annotations


class ProviderError(Exception):
    """A send failed. ``permanent`` errors are never retried (bad recipient, 4xx). A
    transient one may say when to try again at the earliest (``retry_after_s``: the
    provider's ``Retry-After``): the retry waits at least that long."""

    def __init__(
        self, message: str, *, permanent: bool, retry_after_s: float | None = None
    ) -> None:
        super().__init__(message)
        self.permanent = permanent
        self.retry_after_s = retry_after_s
