"""The server-side SVG drawing of a workflow DAG."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from console.drawing import draw_workflow_svg
from tests.factories import email_sms_definition

SVG = "{http://www.w3.org/2000/svg}"


def nodes(svg: str) -> dict[str, ET.Element]:
    root = ET.fromstring(svg)
    return {g.get("data-node-id"): g for g in root.iter(f"{SVG}g") if g.get("data-node-id")}


def test_every_node_is_drawn_in_topological_columns():
    svg = str(draw_workflow_svg(email_sms_definition(delay="15m")))
    drawn = nodes(svg)  # also proves the SVG is well-formed XML
    assert set(drawn) == {"hello", "wait", "text"}
    xs = {node_id: float(g.find(f"{SVG}rect").get("x")) for node_id, g in drawn.items()}
    assert xs["hello"] < xs["wait"] < xs["text"]
    assert "duration 15m" in svg


def test_states_and_current_node_are_marked():
    svg = str(
        draw_workflow_svg(
            email_sms_definition(),
            current_node="text",
            node_states={"hello": "succeeded", "text": "failed"},
        )
    )
    drawn = nodes(svg)
    assert "nf-node-succeeded" in drawn["hello"].get("class")
    assert drawn["text"].get("class").split() == ["nf-node", "nf-node-failed", "nf-node-current"]
    assert "current node" in svg  # legend


def test_text_from_the_definition_is_escaped():
    definition = {
        "entry_node_id": "a",
        "nodes": [
            {"id": "a", "type": "sms", "config": {"to": "<script>x</script>", "body": "b"}},
            {"id": "b", "type": "sms", "config": {"to": "1", "body": "b"}},
        ],
        "edges": [{"from": "a", "to": "b", "condition": 'payload.x == "<img src=x>"'}],
    }
    svg = str(draw_workflow_svg(definition))
    assert "<script>" not in svg and "<img" not in svg
    assert "&lt;script&gt;" in svg
    ET.fromstring(svg)


def test_branch_labels_show_order_and_conditions():
    definition = {
        "entry_node_id": "s",
        "nodes": [{"id": i, "type": "delay", "config": {"delay_ms": 0}} for i in "sabc"],
        "edges": [
            {"from": "s", "to": "a", "condition": "payload.vip"},
            {"from": "s", "to": "b", "condition": "payload.new"},
            {"from": "s", "to": "c"},
        ],
    }
    svg = str(draw_workflow_svg(definition))
    labels = re.findall(r'<g class="nf-edge-label"><title>([^<]*)</title>', svg)
    assert labels == ["1. if payload.vip", "2. if payload.new", "3. else"]


def test_nothing_to_draw_is_empty():
    assert draw_workflow_svg(None) == ""
    assert draw_workflow_svg({"nodes": []}) == ""


def _boxes(svg: str, css_class: str) -> list[tuple[float, float, float, float]]:
    """(x, y, w, h) of the first rect of every <g class="css_class ...">."""
    import re

    out = []
    for group in re.findall(rf'<g class="{css_class}[^"]*".*?</g>', svg, re.S):
        m = re.search(r'<rect x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" height="([\d.]+)"', group)
        out.append(tuple(float(v) for v in m.groups()))
    return out


def _overlap(a, b) -> bool:
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


def branching_definition() -> dict:
    nodes = [{"id": "start", "type": "delay", "config": {"duration": "1s"}}]
    edges = []
    for i in range(4):
        nodes.append({"id": f"n{i}", "type": "sms", "config": {"to": "+1500", "body": "x"}})
        condition = f'payload.plan == "enterprise-annual-{i}" and payload.region == "eu-west"'
        edges.append({"from": "start", "to": f"n{i}", "condition": condition})
    return {"entry_node_id": "start", "nodes": nodes, "edges": edges}


def test_edge_labels_overlap_neither_each_other_nor_nodes_and_keep_the_full_text():
    from console.drawing import MIN_FONT_PX, draw_workflow_svg

    svg = str(draw_workflow_svg(branching_definition()))
    labels = _boxes(svg, "nf-edge-label")
    nodes = _boxes(svg, "nf-node")
    assert len(labels) == 4 and len(nodes) == 5
    for i, a in enumerate(labels):
        assert not any(_overlap(a, b) for b in labels[i + 1 :])
        assert not any(_overlap(a, n) for n in nodes)
    assert (
        "payload.plan == &quot;enterprise-annual-3&quot; and payload.region == &quot;eu-west&quot;"
        in svg
    )
    # Never shrunk to fit: no max-width on the svg, a scrolling box around it.
    assert 'class="nf-dag-scroll"' in svg and "max-width:100%;height:auto" not in svg
    font_sizes = {int(size) for size in __import__("re").findall(r'font-size="(\d+)"', svg)}
    assert min(font_sizes) >= MIN_FONT_PX


def test_failing_node_shows_its_error_and_waiting_node_its_deadline():
    from console.drawing import draw_workflow_svg
    from tests.factories import email_sms_definition

    failed = str(
        draw_workflow_svg(
            email_sms_definition(),
            current_node="text",
            node_states={"hello": "succeeded", "text": "failed"},
            node_errors={"text": "body: undefined variable 'nmae'"},
        )
    )
    assert "undefined variable" in failed
    waiting = str(
        draw_workflow_svg(
            email_sms_definition(delay="12d"),
            current_node="wait",
            node_states={"hello": "succeeded"},
            waiting_until="2026-12-05 10:00 UTC",
        )
    )
    assert "nf-node-waiting" in waiting and "waiting until 2026-12-05 10:00 UTC" in waiting


def test_a_send_without_to_shows_the_recipient_address_it_goes_to():
    definition = {
        "entry_node_id": "mail",
        "nodes": [
            {"id": "mail", "type": "email", "config": {"subject": "s", "body": "b"}},
            {"id": "text", "type": "sms", "config": {"body": "b"}},
            {"id": "copy", "type": "sms", "config": {"to": "{{ payload.phone }}", "body": "b"}},
            {"id": "cc", "type": "email", "config": {"to": ["a@x.io", "b@x.io"], "body": "b"}},
        ],
        "edges": [
            {"from": "mail", "to": "text"},
            {"from": "text", "to": "copy"},
            {"from": "copy", "to": "cc"},
        ],
    }
    drawn = nodes(str(draw_workflow_svg(definition)))
    summaries = {node_id: [t.text for t in g.iter(f"{SVG}text")][2] for node_id, g in drawn.items()}
    assert summaries == {
        "mail": "to recipient.email",
        "text": "to recipient.phone",
        "copy": "to {{ payload.phone }}",
        "cc": "to a@x.io, b@x.io",
    }


def test_a_skipped_node_shows_why_it_sent_nothing():
    svg = str(
        draw_workflow_svg(
            email_sms_definition(),
            node_states={"hello": "skipped", "text": "failed"},
            node_errors={"text": "to: rendered to an empty phone number", "hello": "ignored"},
            node_skips={"hello": "preference_opt_out, rule categories.marketing"},
        )
    )
    drawn = nodes(svg)

    def lines(node_id, kind):
        return [t.text for t in drawn[node_id].iter(f"{SVG}text") if t.get("class") == kind]

    assert lines("hello", "nf-node-skip-reason") == [
        "preference_opt_out, rule",
        "categories.marketing",
    ]
    assert (
        "preference_opt_out, rule categories.marketing" in drawn["hello"].find(f"{SVG}title").text
    )
    assert lines("hello", "nf-node-error") == []
    assert lines("text", "nf-node-error") == ["to: rendered to an empty phone", "number"]
