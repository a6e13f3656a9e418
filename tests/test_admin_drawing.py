"""The server-side SVG drawing of a workflow DAG."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from workflows.drawing import draw_workflow_svg

from .factories import email_sms_definition

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
