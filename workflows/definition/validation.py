"""``validate_definition``: structure, node configs, templates, graph and variables, in
that order; every problem found is reported, each naming its node and field."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings

from notifyflow.limits import MAX_JSON_DEPTH, json_depth_exceeds

from . import node_types
from .fields import check_cancel_on, check_config, check_interests, template_problem, without_nulls
from .graph import find_cycle, unreachable
from .problems import DefinitionError, DefinitionProblem
from .specs import NODE_ID_RE
from .variables import check_variables

TOP_LEVEL_FIELDS = frozenset({"entry_node_id", "nodes", "edges", "interests", "cancel_on"})


def validate_definition(definition: Any) -> dict[str, Any]:
    """Validate a definition (structure, node configs, templates, graph); return the
    normalized definition or raise DefinitionError listing every problem."""
    if not isinstance(definition, dict):
        raise DefinitionError([DefinitionProblem("definition", "must be a JSON object")])
    _check_caps(definition)
    problems = [
        DefinitionProblem(key, "unknown field", code="unknown_field")
        for key in sorted(set(definition) - TOP_LEVEL_FIELDS)
    ]
    nodes = definition.get("nodes")
    if not isinstance(nodes, list) or not nodes:
        problems.append(DefinitionProblem("nodes", "must be a non-empty list of nodes"))
        nodes = []
    edges = definition.get("edges", [])
    if not isinstance(edges, list):
        problems.append(DefinitionProblem("edges", "must be a list of edges"))
        edges = []
    ids, clean_nodes = _check_nodes(nodes, problems)
    entry = definition.get("entry_node_id")
    problems.extend(_check_entry(entry, ids))
    clean_edges = _check_edges(edges, ids, problems)
    if not problems:
        problems.extend(_check_graph(ids, clean_nodes, clean_edges, str(entry)))
    interests = definition.get("interests", [])
    problems.extend(check_interests(interests))
    cancel_on = definition.get("cancel_on", [])
    problems.extend(check_cancel_on(cancel_on))
    if not problems:
        problems.extend(check_variables(clean_nodes, clean_edges, interests, cancel_on))
    if problems:
        raise DefinitionError(problems)
    clean_definition: dict[str, Any] = {
        "entry_node_id": entry,
        "nodes": clean_nodes,
        "edges": clean_edges,
    }
    if interests:
        clean_definition["interests"] = interests
    if cancel_on:
        clean_definition["cancel_on"] = [
            {k: v for k, v in rule.items() if v is not None} for rule in cancel_on
        ]
    return clean_definition


def _check_nodes(
    nodes: list[Any], problems: list[DefinitionProblem]
) -> tuple[list[str], list[dict[str, Any]]]:
    """The node ids (each once, in order) and the normalized nodes whose type and config
    could be read; the problems found go to ``problems``."""
    ids: list[str] = []
    clean_nodes: list[dict[str, Any]] = []
    for index, node in enumerate(nodes):
        path = f"nodes[{index}]"
        if not isinstance(node, dict):
            problems.append(DefinitionProblem(path, "must be an object {id, type, config}"))
            continue
        problems.extend(_check_node_id(node.get("id"), path, ids))
        clean = _check_node(node, path, problems)
        if clean is not None:
            clean_nodes.append(clean)
    return ids, clean_nodes


def _check_node_id(node_id: Any, path: str, ids: list[str]) -> list[DefinitionProblem]:
    """Appends a valid, new ``node_id`` to ``ids``; else the problem with it."""
    if not isinstance(node_id, str) or not NODE_ID_RE.match(node_id):
        label = node_id if isinstance(node_id, str) else None
        return [
            DefinitionProblem(
                f"{path}.id",
                "must be 1-64 letters, digits, '_' or '-'",
                node=label,
                code="invalid_node_id",
            )
        ]
    if node_id in ids:
        return [
            DefinitionProblem(
                f"{path}.id",
                f"duplicate node id {node_id!r}",
                node=node_id,
                code="duplicate_node_id",
            )
        ]
    ids.append(node_id)
    return []


def _check_node(
    node: dict[str, Any], path: str, problems: list[DefinitionProblem]
) -> dict[str, Any] | None:
    """The normalized node, or None if its type or config cannot be read."""
    node_id = node.get("id")
    label = node_id if isinstance(node_id, str) else None
    for key in sorted(set(node) - {"id", "type", "config"}):
        problems.append(
            DefinitionProblem(f"{path}.{key}", "unknown field", node=label, code="unknown_field")
        )
    node_type = node_types.find(node.get("type"))
    if node_type is None:
        problems.append(
            DefinitionProblem(
                f"{path}.type",
                f"must be one of {', '.join(node_types.names())}",
                node=label,
                code="invalid_node_type",
            )
        )
        return None
    config = node.get("config", {})
    if not isinstance(config, dict):
        problems.append(DefinitionProblem(f"{path}.config", "must be an object", node=label))
        return None
    problems.extend(
        check_config(
            node_type.name,
            node_type.fields,
            node_type.exactly_one_of,
            config,
            path=f"{path}.config",
            node=label,
        )
    )
    return {"id": node_id, "type": node_type.name, "config": without_nulls(config)}


def _check_entry(entry: Any, ids: list[str]) -> list[DefinitionProblem]:
    if not isinstance(entry, str) or not entry:
        return [DefinitionProblem("entry_node_id", "is required", code="required")]
    if entry not in ids:
        return [
            DefinitionProblem(
                "entry_node_id", f"no node has id {entry!r}", node=entry, code="unknown_node"
            )
        ]
    return []


def _check_edges(
    edges: list[Any], ids: list[str], problems: list[DefinitionProblem]
) -> list[dict[str, Any]]:
    """The normalized edges whose ends are known nodes; the problems go to ``problems``."""
    clean_edges: list[dict[str, Any]] = []
    for index, edge in enumerate(edges):
        path = f"edges[{index}]"
        if not isinstance(edge, dict):
            problems.append(DefinitionProblem(path, "must be an object {from, to, condition?}"))
            continue
        for key in sorted(set(edge) - {"from", "to", "condition"}):
            problems.append(
                DefinitionProblem(f"{path}.{key}", "unknown field", code="unknown_field")
            )
        ends = _check_edge_ends(edge, path, ids)
        problems.extend(ends)
        condition = edge.get("condition")
        if condition is not None:
            problems.extend(_check_edge_condition(condition, path, edge.get("from")))
        if not ends:
            clean = {"from": edge["from"], "to": edge["to"]}
            if isinstance(condition, str):
                clean["condition"] = condition
            clean_edges.append(clean)
    return clean_edges


def _check_edge_ends(edge: dict[str, Any], path: str, ids: list[str]) -> list[DefinitionProblem]:
    return [
        DefinitionProblem(
            f"{path}.{end}",
            f"no node has id {value!r}",
            node=value if isinstance(value, str) else None,
            code="unknown_node",
        )
        for end in ("from", "to")
        if not isinstance(value := edge.get(end), str) or value not in ids
    ]


def _check_edge_condition(condition: Any, path: str, source: Any) -> list[DefinitionProblem]:
    if not isinstance(condition, str):
        return [DefinitionProblem(f"{path}.condition", "must be a string", node=source)]
    problem = template_problem(
        condition,
        f"{path}.condition",
        source if isinstance(source, str) else None,
        kind="condition",
    )
    return [problem] if problem else []


def _check_graph(
    ids: list[str], nodes: list[dict[str, Any]], edges: list[dict[str, Any]], entry: str
) -> list[DefinitionProblem]:
    """A cycle, then the nodes the entry node does not reach."""
    problems = []
    cycle = find_cycle(ids, edges)
    if cycle:
        problems.append(
            DefinitionProblem(
                "edges",
                "the graph has a cycle: " + " -> ".join(cycle),
                node=cycle[0],
                code="cycle",
            )
        )
    problems.extend(unreachable(nodes, edges, entry))
    return problems


def _check_caps(definition: dict[str, Any]) -> None:
    """Size caps, checked before anything walks the definition."""
    if json_depth_exceeds(definition, MAX_JSON_DEPTH):
        raise DefinitionError(
            [
                DefinitionProblem(
                    "definition", f"nested more than {MAX_JSON_DEPTH} levels deep", code="too_deep"
                )
            ]
        )
    size = len(json.dumps(definition, separators=(",", ":"), default=str).encode())
    limit = settings.NOTIFYFLOW_DEFINITION_MAX_BYTES
    if size > limit:
        raise DefinitionError(
            [
                DefinitionProblem(
                    "definition",
                    f"{size} bytes is over the limit of {limit} bytes",
                    code="definition_too_large",
                )
            ]
        )
    nodes = definition.get("nodes")
    most = settings.NOTIFYFLOW_DEFINITION_MAX_NODES
    if isinstance(nodes, list) and len(nodes) > most:
        raise DefinitionError(
            [
                DefinitionProblem(
                    "nodes",
                    f"{len(nodes)} nodes is over the limit of {most}",
                    code="too_many_nodes",
                )
            ]
        )
