"""Server-side SVG drawing of a workflow DAG for the operator console (no JavaScript).

Layout: each node sits in the column of its longest path from a source (entry node
first), edges run left to right as curves labelled with their order and condition.
A trigger instance's view passes the current node and the outcome of executed nodes
to colour them. Every piece of text from the definition is escaped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

NODE_W, NODE_H = 190, 58
COL_GAP, ROW_GAP = 110, 34
PAD = 24
LEGEND_H = 28
CHAR_W = 6.4  # average glyph width at 11px, to size label backgrounds

TYPE_COLOURS = {
    "email": "#0b6bcb",
    "sms": "#7b3fb3",
    "delay": "#5f6b7a",
    "wait": "#b26a00",
    "emit": "#1d7f4e",
    "webhook": "#a33a5b",
}
STATE_STYLES = {
    # state -> (fill, stroke, caption)
    "succeeded": ("#dff3e4", "#1a7f37", "executed"),
    "failed": ("#fbe3e3", "#c62828", "failed"),
    None: ("#ffffff", "#8a94a3", ""),
}
CURRENT_STROKE = "#e07b00"


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _summary(node: Mapping[str, Any]) -> str:
    config = node.get("config") or {}
    if not isinstance(config, Mapping):
        return ""
    kind = node.get("type")
    if kind == "delay":
        for key in ("duration", "delay_ms", "until"):
            if config.get(key) is not None:
                value = config[key]
                return f"{value} ms" if key == "delay_ms" else f"{key} {value}"
    if kind in ("email", "sms"):
        return f"to {config.get('to', '')}"
    if kind == "wait":
        timeout = config.get("timeout") or f"{config.get('timeout_ms')} ms"
        return f"for {config.get('event', '')} ≤ {timeout}"
    if kind == "emit":
        return f"event {config.get('event', '')}"
    if kind == "webhook":
        return f"{config.get('method', 'POST')} {config.get('url', '')}"
    return ""


def _layers(ids: list[str], edges: list[tuple[str, str]]) -> dict[str, int]:
    """Longest-path layering (Kahn's order). Nodes on a cycle, which a validated
    definition never has, stay in column 0 rather than break the page."""
    incoming = {i: 0 for i in ids}
    outgoing: dict[str, list[str]] = {i: [] for i in ids}
    for src, dst in edges:
        outgoing[src].append(dst)
        incoming[dst] += 1
    layer = dict.fromkeys(ids, 0)
    ready = [i for i in ids if incoming[i] == 0]
    while ready:
        node = ready.pop(0)
        for nxt in outgoing[node]:
            layer[nxt] = max(layer[nxt], layer[node] + 1)
            incoming[nxt] -= 1
            if incoming[nxt] == 0:
                ready.append(nxt)
    return layer


def _positions(ids: list[str], edges: list[tuple[str, str]]) -> dict[str, tuple[int, int]]:
    layer = _layers(ids, edges)
    columns: dict[int, list[str]] = {}
    for node_id in ids:
        columns.setdefault(layer[node_id], []).append(node_id)
    parents: dict[str, list[str]] = {i: [] for i in ids}
    for src, dst in edges:
        parents[dst].append(src)
    rows: dict[str, float] = {}
    tallest = max(len(col) for col in columns.values())
    positions: dict[str, tuple[int, int]] = {}
    for col in sorted(columns):
        members = columns[col]
        # Order each column by its parents' rows (barycentre), then definition order,
        # which keeps most edges from crossing.
        members.sort(key=lambda n: _barycentre(n, parents, rows, ids))
        offset = (tallest - len(members)) * (NODE_H + ROW_GAP) / 2
        for row, node_id in enumerate(members):
            rows[node_id] = row
            positions[node_id] = (
                PAD + col * (NODE_W + COL_GAP),
                int(PAD + offset + row * (NODE_H + ROW_GAP)),
            )
    return positions


def _barycentre(
    node_id: str, parents: Mapping[str, list[str]], rows: Mapping[str, float], ids: list[str]
) -> tuple[float, int]:
    placed = [rows[p] for p in parents[node_id] if p in rows]
    return (sum(placed) / len(placed) if placed else float(ids.index(node_id)), ids.index(node_id))


def draw_workflow_svg(
    definition: Mapping[str, Any] | None,
    *,
    current_node: str | None = None,
    node_states: Mapping[str, str] | None = None,
) -> SafeString:
    """An inline <svg> of ``definition``; empty string when there is nothing to draw.

    ``node_states`` maps node id -> ``"succeeded"`` or ``"failed"`` (the outcome of
    that node's latest attempt); ``current_node`` is outlined.
    """
    if not isinstance(definition, Mapping):
        return mark_safe("")
    nodes = [n for n in definition.get("nodes") or [] if isinstance(n, Mapping)]
    ids = [str(n.get("id")) for n in nodes]
    if not nodes or len(set(ids)) != len(ids):
        return mark_safe("")
    by_id = dict(zip(ids, nodes, strict=True))
    raw_edges = [e for e in definition.get("edges") or [] if isinstance(e, Mapping)]
    edges = [e for e in raw_edges if str(e.get("from")) in by_id and str(e.get("to")) in by_id]
    pairs = [(str(e["from"]), str(e["to"])) for e in edges]
    positions = _positions(ids, pairs)
    states = dict(node_states or {})
    entry = str(definition.get("entry_node_id"))

    width = max(x for x, _ in positions.values()) + NODE_W + PAD
    height = max(y for _, y in positions.values()) + NODE_H + PAD
    show_legend = bool(states) or current_node is not None
    total_height = height + (LEGEND_H if show_legend else 0)

    parts: list[str] = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="nf-dag" width="{width}" '
        f'height="{total_height}" viewBox="0 0 {width} {total_height}" role="img" '
        f'aria-label="Workflow graph" font-family="system-ui, -apple-system, Segoe UI, '
        f'Roboto, sans-serif" style="max-width:100%;height:auto;background:#fcfcfd;'
        f'border:1px solid #e3e6ea;border-radius:6px">',
        '<defs><marker id="nf-arrow" viewBox="0 0 10 10" refX="9" refY="5" '
        'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
        '<path d="M0,0 L10,5 L0,10 z" fill="#5f6b7a"/></marker></defs>',
    ]
    parts.extend(_edges_svg(edges, positions))
    for node_id in ids:
        parts.append(
            _node_svg(
                by_id[node_id],
                node_id,
                positions[node_id],
                state=states.get(node_id),
                current=node_id == current_node,
                entry=node_id == entry,
            )
        )
    if show_legend:
        parts.append(_legend_svg(height))
    parts.append("</svg>")
    # Safe: every piece of text interpolated above went through escape().
    return mark_safe("".join(parts))


def _edges_svg(
    edges: Iterable[Mapping[str, Any]], positions: Mapping[str, tuple[int, int]]
) -> list[str]:
    out: list[str] = []
    labels: list[str] = []
    per_source: dict[str, list[Mapping[str, Any]]] = {}
    for edge in edges:
        per_source.setdefault(str(edge["from"]), []).append(edge)
    for src, outs in per_source.items():
        for order, edge in enumerate(outs, start=1):
            dst = str(edge["to"])
            x1, y1 = positions[src][0] + NODE_W, positions[src][1] + NODE_H // 2
            x2, y2 = positions[dst][0], positions[dst][1] + NODE_H // 2
            if x2 <= x1:  # same column cannot happen with longest-path layers; be safe
                x2 = x1 + COL_GAP
            mid = (x1 + x2) / 2
            out.append(
                f'<path class="nf-edge" d="M{x1},{y1} C{mid},{y1} {mid},{y2} {x2 - 2},{y2}" '
                f'fill="none" stroke="#5f6b7a" stroke-width="1.5" '
                f'marker-end="url(#nf-arrow)"/>'
            )
            condition = edge.get("condition")
            if condition is not None:
                text = f"if {condition}"
            elif len(outs) > 1:
                text = "else" if order == len(outs) else "always"
            else:
                continue
            if len(outs) > 1:
                text = f"{order}. {text}"
            label = _short(str(text), 30)
            # The cubic's midpoint: (P0 + 3P1 + 3P2 + P3) / 8.
            lx = (x1 + 3 * mid + 3 * mid + x2) / 8
            ly = (y1 + 3 * y1 + 3 * y2 + y2) / 8
            w = len(label) * CHAR_W + 10
            labels.append(
                f'<g class="nf-edge-label"><title>{escape(str(text))}</title>'
                f'<rect x="{lx - w / 2:.1f}" y="{ly - 9:.1f}" width="{w:.1f}" height="17" '
                f'rx="4" fill="#fff" stroke="#c9ced6"/>'
                f'<text x="{lx:.1f}" y="{ly + 4:.1f}" font-size="11" text-anchor="middle" '
                f'fill="#37414f">{escape(label)}</text></g>'
            )
    return out + labels


def _node_svg(
    node: Mapping[str, Any],
    node_id: str,
    pos: tuple[int, int],
    *,
    state: str | None,
    current: bool,
    entry: bool,
) -> str:
    x, y = pos
    fill, stroke, caption = STATE_STYLES.get(state, STATE_STYLES[None])
    kind = str(node.get("type", "?"))
    colour = TYPE_COLOURS.get(kind, "#5f6b7a")
    summary = _summary(node)
    classes = ["nf-node", f"nf-node-{state}" if state else "nf-node-pending"]
    if current:
        classes.append("nf-node-current")
        caption = "current" + (f" · {caption}" if caption else "")
    tooltip = f"{node_id} ({kind})" + (f"\n{summary}" if summary else "")
    parts = [
        f'<g class="{" ".join(classes)}" data-node-id="{escape(node_id)}">',
        f"<title>{escape(tooltip)}</title>",
        f'<rect x="{x}" y="{y}" width="{NODE_W}" height="{NODE_H}" rx="7" fill="{fill}" '
        f'stroke="{CURRENT_STROKE if current else stroke}" '
        f'stroke-width="{3.5 if current else 1.5}"/>',
        f'<rect x="{x}" y="{y}" width="6" height="{NODE_H}" rx="3" fill="{colour}"/>',
        f'<text x="{x + 14}" y="{y + 20}" font-size="13" font-weight="700" fill="#1f2933">'
        f"{escape(_short(node_id, 22))}</text>",
        f'<text x="{x + NODE_W - 8}" y="{y + 20}" font-size="10" font-weight="700" '
        f'text-anchor="end" fill="{colour}">{escape(kind.upper())}</text>',
        f'<text x="{x + 14}" y="{y + 37}" font-size="11" fill="#4b5563">'
        f"{escape(_short(summary, 28))}</text>",
    ]
    if caption:
        parts.append(
            f'<text x="{x + 14}" y="{y + 51}" font-size="10" font-weight="600" '
            f'fill="{CURRENT_STROKE if current else stroke}">{escape(caption)}</text>'
        )
    if entry:
        parts.append(
            f'<path d="M{x - 16},{y + NODE_H // 2 - 6} L{x - 4},{y + NODE_H // 2} '
            f'L{x - 16},{y + NODE_H // 2 + 6} z" fill="#1f2933"><title>entry node</title></path>'
        )
    parts.append("</g>")
    return "".join(parts)


def _legend_svg(top: int) -> str:
    items = [
        ("#dff3e4", "#1a7f37", 1.5, "executed"),
        ("#fbe3e3", "#c62828", 1.5, "failed (latest attempt)"),
        ("#ffffff", CURRENT_STROKE, 3, "current node"),
        ("#ffffff", "#8a94a3", 1.5, "not run"),
    ]
    out = []
    x = PAD
    for fill, stroke, width, label in items:
        out.append(
            f'<rect x="{x}" y="{top}" width="14" height="12" rx="3" fill="{fill}" '
            f'stroke="{stroke}" stroke-width="{width}"/>'
            f'<text x="{x + 20}" y="{top + 10}" font-size="11" fill="#37414f">{label}</text>'
        )
        x += 40 + int(len(label) * CHAR_W)
    return "".join(out)
