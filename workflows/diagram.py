"""A workflow definition as text another tool draws: a Mermaid ``flowchart`` or a
Graphviz ``digraph``. Pure functions, definition in, text out.

Every node appears with its id and type, every edge with its condition as its label
(prefixed by its order when a node has several outgoing edges: the first that holds is
followed). Text from the definition is escaped for each language, so any node id or
condition yields a valid diagram - whatever quotes, brackets, ``#``, ``|``, newlines or
non-ASCII it holds. Each node's shape is its type's (``Drawing`` of its declaration,
``definition.node_types``); a type not registered is drawn as a plain box.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .definition import Drawing, node_types

FORMATS = ("mermaid", "dot")
_PLAIN = Drawing()


def _drawing(kind: str) -> Drawing:
    node_type = node_types.find(kind)
    return node_type.drawing if node_type is not None else _PLAIN


def _nodes(definition: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(id, type) of every node, in definition order."""
    return [
        (str(node.get("id")), str(node.get("type", "?")))
        for node in definition.get("nodes") or []
        if isinstance(node, Mapping)
    ]


def _edges(definition: Mapping[str, Any]) -> list[tuple[str, str, str | None]]:
    """(from, to, label) of every edge: its condition, numbered when its source has
    several outgoing edges (an unconditional one is then "always", or "else" last)."""
    edges = [e for e in definition.get("edges") or [] if isinstance(e, Mapping)]
    outs: dict[str, int] = {}
    for edge in edges:
        outs[str(edge.get("from"))] = outs.get(str(edge.get("from")), 0) + 1
    seen: dict[str, int] = {}
    result = []
    for edge in edges:
        src, dst = str(edge.get("from")), str(edge.get("to"))
        condition = edge.get("condition")
        order = seen[src] = seen.get(src, 0) + 1
        label: str | None = None if condition is None else str(condition)
        if outs[src] > 1:
            if label is None:
                label = "else" if order == outs[src] else "always"
            label = f"{order}. {label}"
        result.append((src, dst, label))
    return result


# --- Mermaid -----------------------------------------------------------------------------

# Characters Mermaid reads as syntax even inside a quoted label: the quote itself, '#'
# (entity codes), '<' '>' '&' (HTML labels), '`' (markdown strings), '|' (edge text),
# '\'. They become numeric entity codes ``#<code>;``, which Mermaid renders as the
# character. Line breaks and other control characters likewise.
_MERMAID_UNSAFE = set('"#<>&`|\\')


def mermaid_escape(text: str) -> str:
    return "".join(
        f"#{ord(ch)};" if ch in _MERMAID_UNSAFE or ord(ch) < 32 or ord(ch) == 127 else ch
        for ch in text
    )


def to_mermaid(definition: Mapping[str, Any], *, title: str | None = None) -> str:
    """A Mermaid ``flowchart LR``. Nodes get generated ids (``n0``, ``n1``, ...) so a
    definition's id never has to be a valid Mermaid identifier; the label shows it."""
    nodes = _nodes(definition)
    ids = {node_id: f"n{index}" for index, (node_id, _) in enumerate(nodes)}
    lines = []
    if title:
        lines += ["---", f'title: "{mermaid_escape(title)}"', "---"]
    lines.append("flowchart LR")
    for node_id, kind in nodes:
        open_, close = _drawing(kind).mermaid
        text = f"{mermaid_escape(node_id)}<br/><small>{mermaid_escape(kind)}</small>"
        lines.append(f'    {ids[node_id]}{open_}"{text}"{close}')
    for src, dst, label in _edges(definition):
        if src not in ids or dst not in ids:
            continue  # a validated definition has none; never emit a dangling id
        arrow = "-->" if label is None else f'-->|"{mermaid_escape(label)}"|'
        lines.append(f"    {ids[src]} {arrow} {ids[dst]}")
    entry = definition.get("entry_node_id")
    if entry in ids:
        lines.append("    classDef entry stroke-width:3px")
        lines.append(f"    class {ids[str(entry)]} entry")
    return "\n".join(lines) + "\n"


# --- DOT ---------------------------------------------------------------------------------


def dot_quote(text: str) -> str:
    """A DOT double-quoted string: backslash and quote escaped, line breaks as ``\\n``
    (DOT's own escape in labels), other control characters dropped."""
    out = []
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch in "\r\n":
            out.append("\\n")
        elif ord(ch) < 32 or ord(ch) == 127:
            continue
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def to_dot(definition: Mapping[str, Any], *, title: str | None = None) -> str:
    """A Graphviz ``digraph``; node ids are quoted strings, so they need no rewriting."""
    lines = [
        f"digraph {dot_quote(title or 'workflow')} {{",
        "    rankdir=LR;",
        '    node [fontname="Helvetica", fontsize=11];',
        '    edge [fontname="Helvetica", fontsize=10];',
    ]
    entry = definition.get("entry_node_id")
    for node_id, kind in _nodes(definition):
        # \n inside the quoted label is DOT's line break, not a Python one.
        drawing = _drawing(kind)
        attrs = [
            f"label={dot_quote(node_id)[:-1]}\\n{dot_quote(kind)[1:]}",
            f"shape={drawing.dot_shape}",
        ]
        if drawing.dot_style:
            attrs.append(f"style={drawing.dot_style}")
        if node_id == entry:
            attrs.append("penwidth=3")
        attrs.append(f"tooltip={dot_quote(kind)}")
        lines.append(f"    {dot_quote(node_id)} [{', '.join(attrs)}];")
    for src, dst, label in _edges(definition):
        edge_attrs = "" if label is None else f" [label={dot_quote(label)}]"
        lines.append(f"    {dot_quote(src)} -> {dot_quote(dst)}{edge_attrs};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def diagram(definition: Mapping[str, Any], *, format: str, title: str | None = None) -> str:
    """``definition`` as ``format`` (one of FORMATS); ValueError for another format."""
    if format == "mermaid":
        return to_mermaid(definition, title=title)
    if format == "dot":
        return to_dot(definition, title=title)
    raise ValueError(f"unknown diagram format {format!r}")
