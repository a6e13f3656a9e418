"""The one exception family services raise for an outcome the caller must be told about.

Every way in turns it into its own shape: the API's exception handler
(``api.errors``) into ``{code, field, message, errors}`` with ``status``, the
admin into a form error or a message. Services never raise DRF or Django HTTP errors.
"""

from __future__ import annotations


class ApplicationError(Exception):
    """A rejected request: a stable ``code``, the offending ``field`` (or None), a message
    that names the field, and the HTTP status the API answers with."""

    status: int = 400

    def __init__(
        self,
        *,
        code: str,
        message: str,
        field: str | None = None,
        status: int | None = None,
        details: list[dict[str, str | None]] | None = None,
    ) -> None:
        super().__init__(message)
        self.code, self.message, self.field = code, message, field
        if status is not None:
            self.status = status
        self.details = (
            details if details is not None else [{"field": field, "code": code, "message": message}]
        )


class NotFoundError(ApplicationError):
    status = 404


class ConflictError(ApplicationError):
    """The request is valid but the target's state does not allow it (409)."""

    status = 409
