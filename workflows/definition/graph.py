"""The definition as a graph: cycles, unreachable nodes, and lookups the engine uses."""

from __future__ import annotations

from graphlib import CycleError, TopologicalSorter
from typing import Any

from .problems import DefinitionProblem


def find_cycle(ids: list[str], edges: list[dict[str, Any]]) -> list[str] | None:
    """A cycle as a list of node ids (first == last), or None. The sorter walks the
    nodes in ``ids`` order and each node's edges in their order, so the cycle named is
    the first a depth-first search from the first node meets (iterative: a long chain
    does not hit the recursion limit)."""
    sorter: TopologicalSorter[str] = TopologicalSorter()
    for node_id in ids:
        sorter.add(node_id)
    for edge in edges:
        sorter.add(edge["to"], edge["from"])
    try:
        sorter.prepare()
    except CycleError as exc:
        return list(exc.args[1])
    return None


def unreachable(
    nodes: list[dict[str, Any]], edges: list[dict[str, Any]], entry: str
) -> list[DefinitionProblem]:
    """A problem for each node no path of edges leads to from the entry node: it could
    never run, which is almost always a missing or misspelt edge."""
    successors: dict[str, list[str]] = {}
    for edge in edges:
        successors.setdefault(edge["from"], []).append(edge["to"])
    reached = {entry}
    pending = [entry]
    while pending:
        for nxt in successors.get(pending.pop(), []):
            if nxt not in reached:
                reached.add(nxt)
                pending.append(nxt)
    return [
        DefinitionProblem(
            f"nodes[{index}]",
            f"unreachable: no edge leads to it from the entry node {entry!r}",
            node=node["id"],
            code="unreachable_node",
        )
        for index, node in enumerate(nodes)
        if node["id"] not in reached
    ]


def node_by_id(definition: dict[str, Any], node_id: str) -> dict[str, Any]:
    for node in definition["nodes"]:
        if node["id"] == node_id:
            return node
    raise KeyError(node_id)


def outgoing_edges(definition: dict[str, Any], node_id: str) -> list[dict[str, Any]]:
    return [edge for edge in definition["edges"] if edge["from"] == node_id]
