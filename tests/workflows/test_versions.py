"""A definition's text is stable, and the diff of two shows exactly what changed."""

from __future__ import annotations

from workflows.versions import definition_diff, definition_text

ONE = {"entry_node_id": "a", "nodes": [{"id": "a", "type": "email", "config": {"subject": "Hi"}}]}


def test_the_same_definition_always_reads_the_same_whatever_its_key_order():
    shuffled = {"nodes": ONE["nodes"], "entry_node_id": "a"}
    assert definition_text(ONE) == definition_text(shuffled)
    assert definition_text(ONE).endswith("}\n")


def test_the_diff_names_only_the_changed_line_and_is_empty_for_equal_definitions():
    changed = {**ONE, "nodes": [{**ONE["nodes"][0], "config": {"subject": "Hello"}}]}
    diff = definition_diff(ONE, changed, old_label="v1", new_label="v2")
    removed = [line for line in diff.splitlines() if line.startswith("-") and "---" not in line]
    added = [line for line in diff.splitlines() if line.startswith("+") and "+++" not in line]
    assert diff.startswith("--- v1\n+++ v2\n")
    assert removed == ['-        "subject": "Hi"'] and added == ['+        "subject": "Hello"']
    assert definition_diff(ONE, dict(ONE), old_label="v1", new_label="v2") == ""
