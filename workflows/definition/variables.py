"""Variables a template reads that its context never has (a misspelt root, a
``vars.<key>`` no node writes)."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

from workflows.templating import variable_paths

from . import node_types
from .problems import DefinitionProblem

# What a template sees (the engine builds this context): a node's fields and the edge
# conditions; a condition in a node (a wait's match) also sees the event. Interests are
# rendered when the instance is created, cancel_on against each delivered event.
# ``recipient`` and ``unsubscribe_url``: with a recipient; empty otherwise.
NODE_SCOPE = ("payload", "trigger", "workflow", "vars", "now", "recipient", "unsubscribe_url")
INTEREST_SCOPE = ("payload", "trigger")
CANCEL_SCOPE = ("payload", "trigger", "event")


def check_variables(
    nodes: list[dict[str, Any]],
    edges: list[dict[str, Any]],
    interests: list[str],
    cancel_on: list[dict[str, Any]],
) -> list[DefinitionProblem]:
    """A problem for each template or condition that reads a variable its context never
    has: a misspelt root (``paylod.name``) or ``vars.<key>`` no node of this workflow
    writes. In a template that is a permanent failure of every instance; in a condition
    it is silently always false."""
    types = {n["type"]: node_types.get(n["type"]) for n in nodes}
    vars_keys = sorted(
        types[n["type"]].vars_key(n["id"]) for n in nodes if types[n["type"]].writes_vars
    )
    problems: list[DefinitionProblem] = []

    def check(
        source: str, path: str, node: str | None, scope: tuple[str, ...], condition: bool
    ) -> None:
        message = _unknown_variable(source, scope, vars_keys, condition=condition)
        if message:
            problems.append(DefinitionProblem(path, message, node, "unknown_variable"))

    for index, node in enumerate(nodes):
        spec = types[node["type"]].fields
        for key, value in node["config"].items():
            field, path = spec[key], f"nodes[{index}].config.{key}"
            if field.kind == "condition":
                check(value, path, node["id"], NODE_SCOPE + ("event",), True)
            elif field.is_template:
                for where, source in json_strings(value, path):
                    check(source, where, node["id"], NODE_SCOPE, False)
    for index, edge in enumerate(edges):
        if "condition" in edge:
            check(edge["condition"], f"edges[{index}].condition", edge["from"], NODE_SCOPE, True)
    for index, template in enumerate(interests):
        check(template, f"interests[{index}]", None, INTEREST_SCOPE, False)
    for index, rule in enumerate(cancel_on):
        if rule.get("match") is not None:
            check(rule["match"], f"cancel_on[{index}].match", None, CANCEL_SCOPE, True)
    return problems


def _unknown_variable(
    source: str, scope: tuple[str, ...], vars_keys: list[str], *, condition: bool
) -> str | None:
    for path in variable_paths(source, condition=condition):
        if not path:
            continue
        if path[0] not in scope:
            return f"unknown variable {path[0]!r}{_hint(path[0], scope)}; here a template sees " + (
                ", ".join(scope)
            )
        if path[0] == "vars" and len(path) > 1 and path[1] not in vars_keys:
            written = ", ".join(f"vars.{k}" for k in vars_keys) or "none"
            writers = [t.name for t in node_types.all() if t.writes_vars]
            return (
                f"vars.{path[1]}: no node of this workflow writes it{_hint(path[1], vars_keys)} "
                f"(nodes write {written}: <type>_<node id> of {_listed(writers)} nodes)"
            )
    return None


def _listed(names: Sequence[str]) -> str:
    """``a, b and c``."""
    if len(names) < 2:
        return "".join(names)
    return f"{', '.join(names[:-1])} and {names[-1]}"


def _hint(name: str, known: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def json_strings(value: Any, path: str) -> list[tuple[str, str]]:
    """Every string inside a JSON value, with its path."""
    if isinstance(value, str):
        return [(path, value)]
    if isinstance(value, list):
        return [s for i, v in enumerate(value) for s in json_strings(v, f"{path}[{i}]")]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in json_strings(v, f"{path}.{k}")]
    return []
