"""The check of a ``schedule`` field (``{cron, timezone?}``, a ``batch`` node's
alternative to ``window``): a valid five-field cron expression that fires at some time
(``invalid_cron``) and, if given, an IANA timezone (``invalid_timezone``)."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cache
from typing import Any
from zoneinfo import ZoneInfo, available_timezones

from workflows.cron import CronError, next_fire, parse_cron

from .problems import DefinitionProblem

SCHEDULE_KEYS = ("cron", "timezone")


@cache
def _timezones() -> frozenset[str]:
    return frozenset(available_timezones())


def check_schedule(value: Any, path: str, node: str | None) -> list[DefinitionProblem]:
    """The problems of one ``schedule`` value, each naming its field."""
    if not isinstance(value, dict):
        return [DefinitionProblem(path, "must be an object {cron, timezone}", node)]
    problems = [
        DefinitionProblem(f"{path}.{key}", "unknown field", node=node, code="unknown_field")
        for key in sorted(set(value) - set(SCHEDULE_KEYS))
    ]
    cron = value.get("cron")
    if cron is None:
        problems.append(DefinitionProblem(f"{path}.cron", "is required", node, "required"))
    else:
        problem = _cron_problem(cron)
        if problem:
            problems.append(DefinitionProblem(f"{path}.cron", problem, node, "invalid_cron"))
    zone = value.get("timezone")
    if zone is not None and not (isinstance(zone, str) and zone in _timezones()):
        problems.append(
            DefinitionProblem(
                f"{path}.timezone",
                'must be an IANA timezone name such as "Europe/Paris"',
                node,
                "invalid_timezone",
            )
        )
    return problems


def _cron_problem(cron: Any) -> str | None:
    if not isinstance(cron, str):
        return 'must be a cron expression such as "0 9 * * 1-5"'
    try:
        parsed = parse_cron(cron)
    except CronError as exc:
        return str(exc)
    if next_fire(parsed, after=datetime(2000, 1, 1, tzinfo=UTC), zone=ZoneInfo("UTC")) is None:
        return "never fires (no such date)"
    return None
