"""The problems a definition can have, and the error that lists them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from notifyflow.errors import ApplicationError


@dataclass
class DefinitionProblem:
    field: str
    message: str
    node: str | None = None
    code: str = "invalid_definition"

    def as_dict(self) -> dict[str, Any]:
        return {"node": self.node, "field": self.field, "code": self.code, "message": self.message}

    def __str__(self) -> str:
        where = f"node {self.node!r}, " if self.node else ""
        return f"{where}{self.field}: {self.message}"


class DefinitionError(ApplicationError):
    """An invalid definition: ``errors`` lists every problem, each naming node and field
    (the API reports them as ``definition.<field>``)."""

    def __init__(self, errors: list[DefinitionProblem]) -> None:
        self.errors = errors
        details: list[dict[str, str | None]] = [
            {"field": _api_field(p), "code": p.code, "message": f"{_api_field(p)}: {p}"}
            for p in errors
        ]
        first = details[0]
        super().__init__(
            code=str(first["code"]),
            field=first["field"],
            message=str(first["message"]),
            details=details,
        )


def _api_field(problem: DefinitionProblem) -> str:
    return "definition" if problem.field == "definition" else f"definition.{problem.field}"
