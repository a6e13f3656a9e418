"""A workflow definition as Mermaid and DOT text (``workflows.diagram``): every node with
its type, every edge with its condition, text escaped so any id or condition stays
valid Mermaid and DOT (checked with pydot's parser and a strict line grammar for
Mermaid)."""

from __future__ import annotations

import re

import pydot
import pytest

from workflows.diagram import to_dot, to_mermaid

# Node ids and conditions the validator would refuse are still possible in a diagram of
# a definition stored by hand, and the escaping must not rely on the validator.
NASTY_IDS = ['say "hi"', "a[0]]", "x --> y|z", "ünïcødé ✉", "semi;colon#35;", "back\\slash"]
TYPES = ["email", "sms", "delay"] * 2
NASTY_CONDITION = 'payload.plan == "pro" and payload["tags"][0] != \'x|y\' # <b>&amp;'


def _nasty_definition() -> dict:
    nodes = [{"id": nid, "type": t} for nid, t in zip(NASTY_IDS, TYPES, strict=True)]
    nodes.append({"id": "later", "type": "wait"})  # a type this module does not know yet
    edges = [
        {"from": NASTY_IDS[0], "to": NASTY_IDS[1], "condition": NASTY_CONDITION},
        {"from": NASTY_IDS[0], "to": NASTY_IDS[2]},
        {"from": NASTY_IDS[1], "to": NASTY_IDS[3], "condition": "line\nbreak"},
        {"from": NASTY_IDS[3], "to": NASTY_IDS[4]},
        {"from": NASTY_IDS[4], "to": NASTY_IDS[5]},
        {"from": NASTY_IDS[5], "to": "later"},
    ]
    return {"entry_node_id": NASTY_IDS[0], "nodes": nodes, "edges": edges}


_MERMAID_LINE = re.compile(
    r"""^(?:flowchart\ LR
        |\ {4}n\d+(?:\["[^"]*"\]|\("[^"]*"\)|\{\{"[^"]*"\}\})
        |\ {4}n\d+\ -->(?:\|"[^"]*"\|)?\ n\d+
        |\ {4}classDef\ entry\ stroke-width:3px
        |\ {4}class\ n\d+\ entry
        |---|title:\ "[^"]*")$""",
    re.X,
)


def _mermaid_text(quoted: str) -> str:
    """What Mermaid shows for a quoted label: entity codes decoded."""
    return re.sub(r"#(\d+);", lambda m: chr(int(m.group(1))), quoted)


def test_mermaid_is_valid_line_by_line_and_round_trips_ids_and_conditions():
    text = to_mermaid(_nasty_definition(), title='k "v1"')
    labels: list[str] = []
    for line in text.splitlines():
        assert _MERMAID_LINE.match(line), f"not valid Mermaid: {line!r}"
        labels += re.findall(r'"([^"]*)"', line)
    for quoted in labels:
        # Outside entity codes and our own <br/><small>, nothing Mermaid reads as syntax.
        bare = re.sub(r"#\d+;", "", quoted).replace("<br/><small>", "").replace("</small>", "")
        assert not set(bare) & set('"#<>&`|\\\n'), quoted
    shown = [_mermaid_text(q) for q in labels]
    for node_id, kind in zip(NASTY_IDS, TYPES, strict=True):
        assert f"{node_id}<br/><small>{kind}</small>" in shown
    assert "later<br/><small>wait</small>" in shown
    assert f"1. {NASTY_CONDITION}" in shown and "2. else" in shown
    assert "line\nbreak" in shown
    assert text.count("-->") == 6
    assert "class n0 entry" in text


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # pydot's use of pyparsing
def test_dot_parses_and_round_trips_ids_types_and_conditions():
    definition = _nasty_definition()
    text = to_dot(definition, title="k")
    [graph] = pydot.graph_from_dot_data(text)

    def unquote(value: str) -> str:
        assert value.startswith('"') and value.endswith('"')
        return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), value[1:-1])

    nodes = {
        unquote(n.get_name()): n for n in graph.get_nodes() if n.get_name() not in ("node", "edge")
    }
    assert set(nodes) == {*NASTY_IDS, "later"}
    for node_id, kind in zip(NASTY_IDS, TYPES, strict=True):
        assert unquote(nodes[node_id].get("label")) == f"{node_id}\n{kind}"
    assert unquote(nodes["later"].get("label")) == "later\nwait"
    edges = {
        (unquote(e.get_source()), unquote(e.get_destination())): e.get("label")
        for e in graph.get_edges()
    }
    assert len(edges) == 6
    assert unquote(edges[(NASTY_IDS[0], NASTY_IDS[1])]) == f"1. {NASTY_CONDITION}"
    assert unquote(edges[(NASTY_IDS[0], NASTY_IDS[2])]) == "2. else"
    assert unquote(edges[(NASTY_IDS[1], NASTY_IDS[3])]) == "line\nbreak"
    assert edges[(NASTY_IDS[3], NASTY_IDS[4])] is None  # a single unconditional edge
