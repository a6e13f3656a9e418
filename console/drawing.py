"""Server-side SVG drawing of a workflow DAG for the operator console (no JavaScript).

Layout: each node sits in the column of its longest path from a source (entry node
first), edges run left to right as curves labelled with their order and condition.
A trigger instance's view passes the current node and the outcome of executed nodes
to colour them. Each node is drawn as its type declares (``Drawing``: colour, label, the
summary of its config; ``workflows.definition.node_types``), a type not registered in
grey with its name. Every piece of text from the definition is escaped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from workflows.definition import node_types
from workflows.definition.node_types import DEFAULT_COLOUR

NODE_W, NODE_H = 240, 58
# The gap between columns grows with the widest edge label (up to MAX_COL_GAP), so a
# label always sits in the gap, never under a node.
MIN_COL_GAP, MAX_COL_GAP, ROW_GAP = 110, 330, 34
PAD = 24
LEGEND_H = 28
CHAR_W = 6.4  # average glyph width at 11px, to size label backgrounds
LABEL_H, LABEL_MARGIN = 17, 3
ERROR_LINE_H = 14  # < ROW_GAP: a failed node's error lines stay clear of the next row
LABEL_CHARS = 44  # longer conditions are cut; the full text is the label's tooltip
# Never scaled down to fit: the drawing keeps this size and its container scrolls
# sideways (the console's .nf-dag-scroll).
MIN_FONT_PX = 11

STATE_STYLES = {
    # state -> (fill, stroke, caption)
    "succeeded": ("#dff3e4", "#1a7f37", "executed"),
    "failed": ("#fbe3e3", "#c62828", "failed"),
    # Succeeded without sending (a skip: a preference opt-out, no address, ...).
    "skipped": ("#fff6d6", "#8a6d00", "skipped"),
    None: ("#ffffff", "#8a94a3", ""),
}
CURRENT_STROKE = "#e07b00"


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _wrap(text: str, width: int, lines: int) -> list[str]:
    """``text`` in at most ``lines`` lines of ``width`` characters, the last cut."""
    words, out, line = text.split(), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            out.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    out.append(line)
    if len(out) > lines:
        out = out[:lines]
        out[-1] = _short(out[-1] + " …", width)
    return [_short(item, width) for item in out]


def _summary(node: Mapping[str, Any], node_type: node_types.NodeType | None) -> str:
    config = node.get("config") or {}
    if not isinstance(config, Mapping) or node_type is None:
        return ""
    return node_type.summary(config)


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


def _positions(
    ids: list[str], edges: list[tuple[str, str]], col_gap: int = MIN_COL_GAP
) -> dict[str, tuple[int, int]]:
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
                PAD + col * (NODE_W + col_gap),
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
    node_errors: Mapping[str, str] | None = None,
    node_skips: Mapping[str, str] | None = None,
    waiting_until: str | None = None,
) -> SafeString:
    """An inline <svg> of ``definition``, in a sideways-scrolling box; empty string when
    there is nothing to draw.

    ``node_states`` maps node id -> ``"succeeded"``, ``"skipped"`` or ``"failed"`` (the outcome of
    that node's latest attempt); ``node_errors`` node id -> the error of that failed
    attempt, shown in the node; ``node_skips`` node id -> why that skipped node sent
    nothing (its skip reason, and the rule of an opt-out), shown in the node the same
    way; ``current_node`` is outlined, and captioned "waiting until ``waiting_until``"
    when the instance is waiting for that time.
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
    labels = _edge_labels(edges)
    widest = max((_label_width(short) for short, _ in labels.values()), default=0)
    col_gap = int(min(MAX_COL_GAP, max(MIN_COL_GAP, widest + 40)))
    positions = _positions(ids, pairs, col_gap)
    states = dict(node_states or {})
    entry = str(definition.get("entry_node_id"))

    width = max(x for x, _ in positions.values()) + NODE_W + PAD
    height = max(y for _, y in positions.values()) + NODE_H + PAD
    notes = _notes(states, node_errors, node_skips)
    if notes:
        height += 2 * ERROR_LINE_H  # a failed node's error lines, a skipped one's reason
    show_legend = bool(states) or current_node is not None
    skipped = "skipped" in states.values()
    if show_legend:
        width = max(width, _legend_width(skipped) + PAD)
    total_height = height + (LEGEND_H if show_legend else 0)

    parts: list[str] = [
        '<div class="nf-dag-scroll" style="overflow-x:auto;max-width:100%">',
        f'<svg xmlns="http://www.w3.org/2000/svg" class="nf-dag" width="{width}" '
        f'height="{total_height}" viewBox="0 0 {width} {total_height}" role="img" '
        f'aria-label="Workflow graph" font-family="system-ui, -apple-system, Segoe UI, '
        f'Roboto, sans-serif" style="min-width:{width}px;background:#fcfcfd;'
        f'border:1px solid #e3e6ea;border-radius:6px">',
        '<defs><marker id="nf-arrow" viewBox="0 0 10 10" refX="9" refY="5" '
        'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
        '<path d="M0,0 L10,5 L0,10 z" fill="#5f6b7a"/></marker></defs>',
    ]
    edge_paths, label_parts = _edges_svg(edges, positions, labels, col_gap)
    parts.extend(edge_paths)
    for node_id in ids:
        parts.append(
            _node_svg(
                by_id[node_id],
                node_id,
                positions[node_id],
                state=states.get(node_id),
                current=node_id == current_node,
                entry=node_id == entry,
                note=notes.get(node_id),
                waiting_until=waiting_until if node_id == current_node else None,
            )
        )
    # Labels last: drawn over edges and never under a node.
    parts.extend(label_parts)
    if show_legend:
        parts.append(_legend_svg(height, skipped=skipped))
    parts.append("</svg></div>")
    # Safe: every piece of text interpolated above went through escape().
    return mark_safe("".join(parts))


def _notes(
    states: Mapping[str, str],
    errors: Mapping[str, str] | None,
    skips: Mapping[str, str] | None,
) -> dict[str, str]:
    """node id -> the text under it: a failed node's error, a skipped node's reason."""
    wanted = (("failed", errors or {}), ("skipped", skips or {}))
    return {
        node: text
        for state, texts in wanted
        for node, text in texts.items()
        if text and states.get(node) == state
    }


def _label_width(text: str) -> float:
    return len(text) * CHAR_W + 10


def _edge_labels(edges: Iterable[Mapping[str, Any]]) -> dict[int, tuple[str, str]]:
    """id(edge) -> (label as drawn, full text) for the edges that get a label."""
    per_source: dict[str, list[Mapping[str, Any]]] = {}
    for edge in edges:
        per_source.setdefault(str(edge["from"]), []).append(edge)
    labels: dict[int, tuple[str, str]] = {}
    for outs in per_source.values():
        for order, edge in enumerate(outs, start=1):
            condition = edge.get("condition")
            if condition is not None:
                text = f"if {condition}"
            elif len(outs) > 1:
                text = "else" if order == len(outs) else "always"
            else:
                continue
            if len(outs) > 1:
                text = f"{order}. {text}"
            labels[id(edge)] = (_short(str(text), LABEL_CHARS), str(text))
    return labels


def _edges_svg(
    edges: Iterable[Mapping[str, Any]],
    positions: Mapping[str, tuple[int, int]],
    labels: Mapping[int, tuple[str, str]],
    col_gap: int,
) -> tuple[list[str], list[str]]:
    """The edge curves, and their labels placed without overlap: each label sits on
    its edge where the edge enters the gap after its source, and labels in the same
    gap that would collide are pushed down below one another."""
    out: list[str] = []
    placed: list[tuple[float, float, float, str, str]] = []  # x, y, width, short, full
    for edge in edges:
        src, dst = str(edge["from"]), str(edge["to"])
        x1, y1 = positions[src][0] + NODE_W, positions[src][1] + NODE_H // 2
        x2, y2 = positions[dst][0], positions[dst][1] + NODE_H // 2
        if x2 <= x1:  # same column cannot happen with longest-path layers; be safe
            x2 = x1 + col_gap
        mid = (x1 + x2) / 2
        out.append(
            f'<path class="nf-edge" d="M{x1},{y1} C{mid},{y1} {mid},{y2} {x2 - 2},{y2}" '
            f'fill="none" stroke="#5f6b7a" stroke-width="1.5" '
            f'marker-end="url(#nf-arrow)"/>'
        )
        if id(edge) not in labels:
            continue
        short, full = labels[id(edge)]
        w = _label_width(short)
        # In the gap right after the source (where the edges of one source still fan
        # out), at the height the curve has there: t = 0.25 on the cubic.
        t = 0.25
        lx = (1 - t) ** 3 * x1 + 3 * (1 - t) ** 2 * t * mid + 3 * (1 - t) * t**2 * mid + t**3 * x2
        ly = (1 - t) ** 3 * y1 + 3 * (1 - t) ** 2 * t * y1 + 3 * (1 - t) * t**2 * y2 + t**3 * y2
        lx = min(max(lx, x1 + w / 2 + 4), x1 + col_gap - w / 2 - 4)
        placed.append((lx, ly, w, short, full))
    # Resolve collisions top to bottom: a label overlapping one already placed moves
    # down just below it.
    placed.sort(key=lambda item: (item[1], item[0]))
    boxes: list[tuple[float, float, float, float]] = []
    label_parts: list[str] = []
    for lx, ly, w, short, full in placed:
        top = ly - LABEL_H / 2
        moved = True
        while moved:
            moved = False
            for bx, by, bw, bh in boxes:
                if abs(lx - bx) < (w + bw) / 2 and top < by + bh + LABEL_MARGIN and by < top + bh:
                    top = by + bh + LABEL_MARGIN
                    moved = True
        boxes.append((lx, top, w, LABEL_H))
        label_parts.append(
            f'<g class="nf-edge-label"><title>{escape(full)}</title>'
            f'<rect x="{lx - w / 2:.1f}" y="{top:.1f}" width="{w:.1f}" height="{LABEL_H}" '
            f'rx="4" fill="#fff" stroke="#c9ced6"/>'
            f'<text x="{lx:.1f}" y="{top + 12.5:.1f}" font-size="{MIN_FONT_PX}" '
            f'text-anchor="middle" fill="#37414f">{escape(short)}</text></g>'
        )
    return out, label_parts


def _node_svg(
    node: Mapping[str, Any],
    node_id: str,
    pos: tuple[int, int],
    *,
    state: str | None,
    current: bool,
    entry: bool,
    note: str | None = None,
    waiting_until: str | None = None,
) -> str:
    x, y = pos
    fill, stroke, caption = STATE_STYLES.get(state, STATE_STYLES[None])
    kind = str(node.get("type", "?"))
    node_type = node_types.find(kind)
    colour = escape(node_type.drawing.colour if node_type is not None else DEFAULT_COLOUR)
    label = node_type.label if node_type is not None else kind.upper()
    summary = _summary(node, node_type)
    classes = ["nf-node", f"nf-node-{state}" if state else "nf-node-pending"]
    if current and waiting_until:
        classes.append("nf-node-current")
        classes.append("nf-node-waiting")
        caption = f"waiting until {waiting_until}"
    elif current:
        classes.append("nf-node-current")
        caption = "current" + (f" · {caption}" if caption else "")
    tooltip = f"{node_id} ({kind})" + (f"\n{summary}" if summary else "")
    if caption:
        tooltip += f"\n{caption}"
    # A failed node grows by two lines (into the row gap) holding the start of its
    # error, a skipped one its reason; the whole of it is the node's tooltip.
    note_lines = _wrap(note, 36, 2) if note else []
    height = NODE_H + ERROR_LINE_H * len(note_lines)
    if note:
        tooltip += f"\n{note}"
    note_class, note_fill = (
        ("nf-node-skip-reason", "#6b5500") if state == "skipped" else ("nf-node-error", "#c62828")
    )
    parts = [
        f'<g class="{" ".join(classes)}" data-node-id="{escape(node_id)}">',
        f"<title>{escape(tooltip)}</title>",
        f'<rect x="{x}" y="{y}" width="{NODE_W}" height="{height}" rx="7" fill="{fill}" '
        f'stroke="{CURRENT_STROKE if current else stroke}" '
        f'stroke-width="{3.5 if current else 1.5}"/>',
        f'<rect x="{x}" y="{y}" width="6" height="{height}" rx="3" fill="{colour}"/>',
        f'<text x="{x + 14}" y="{y + 20}" font-size="13" font-weight="700" fill="#1f2933">'
        f"{escape(_short(node_id, 22))}</text>",
        f'<text x="{x + NODE_W - 8}" y="{y + 20}" font-size="{MIN_FONT_PX}" font-weight="700" '
        f'text-anchor="end" fill="{colour}">{escape(label)}</text>',
        f'<text x="{x + 14}" y="{y + 37}" font-size="{MIN_FONT_PX}" fill="#4b5563">'
        f"{escape(_short(summary, 32))}</text>",
    ]
    if caption:
        parts.append(
            f'<text class="nf-node-caption" x="{x + 14}" y="{y + 51}" '
            f'font-size="{MIN_FONT_PX}" font-weight="600" '
            f'fill="{CURRENT_STROKE if current else stroke}">{escape(_short(caption, 34))}</text>'
        )
    for index, line in enumerate(note_lines, start=1):
        parts.append(
            f'<text class="{note_class}" x="{x + 14}" y="{y + 51 + index * ERROR_LINE_H}" '
            f'font-size="{MIN_FONT_PX}" fill="{note_fill}">{escape(line)}</text>'
        )
    if entry:
        parts.append(
            f'<path d="M{x - 16},{y + NODE_H // 2 - 6} L{x - 4},{y + NODE_H // 2} '
            f'L{x - 16},{y + NODE_H // 2 + 6} z" fill="#1f2933"><title>entry node</title></path>'
        )
    parts.append("</g>")
    return "".join(parts)


def _legend_items(skipped: bool) -> list[tuple[str, str, float, str]]:
    return [
        ("#dff3e4", "#1a7f37", 1.5, "executed"),
        *([("#fff6d6", "#8a6d00", 1.5, "skipped (sent nothing)")] if skipped else []),
        ("#fbe3e3", "#c62828", 1.5, "failed (latest attempt)"),
        ("#ffffff", CURRENT_STROKE, 3, "current node (or waiting)"),
        ("#ffffff", "#8a94a3", 1.5, "not run"),
    ]


def _legend_step(label: str) -> int:
    return 48 + int(len(label) * 6.8)


def _legend_width(skipped: bool) -> int:
    """From the left edge to the end of the last label (the drawing is at least this
    wide, so no label is cut off)."""
    items = _legend_items(skipped)
    last = items[-1][3]
    return PAD + sum(_legend_step(label) for *_, label in items[:-1]) + 20 + int(len(last) * 6.8)


def _legend_svg(top: int, *, skipped: bool = False) -> str:
    out = []
    x = PAD
    for fill, stroke, width, label in _legend_items(skipped):
        out.append(
            f'<rect x="{x}" y="{top}" width="14" height="12" rx="3" fill="{fill}" '
            f'stroke="{stroke}" stroke-width="{width}"/>'
            f'<text x="{x + 20}" y="{top + 10}" font-size="11" fill="#37414f">{label}</text>'
        )
        x += _legend_step(label)
    return "".join(out)
