"""json_depth_exceeds: the nesting of lists and objects, not the count of values."""

from __future__ import annotations

import pytest

from notifyflow.limits import MAX_JSON_DEPTH, json_depth_exceeds


def _nested(depth: int, container: str) -> object:
    value: object = "leaf"
    for _ in range(depth):
        value = {"k": value} if container == "object" else [value]
    return value


@pytest.mark.parametrize("container", ["object", "list"])
def test_nesting_up_to_the_limit_passes_and_one_more_level_does_not(container):
    assert not json_depth_exceeds(_nested(MAX_JSON_DEPTH, container))
    assert json_depth_exceeds(_nested(MAX_JSON_DEPTH + 1, container))


def test_a_deep_branch_among_shallow_ones_is_found():
    value = {"items": [{"a": 1}] * 1000 + [_nested(MAX_JSON_DEPTH - 1, "list")]}
    assert json_depth_exceeds(value)
    assert not json_depth_exceeds({"items": [{"a": [1, {"b": 2}]}] * 1000})


def test_scalars_do_not_count_and_empty_containers_do():
    assert not json_depth_exceeds("text")
    assert not json_depth_exceeds([[["text"]]], limit=3)
    assert json_depth_exceeds([[[[]]]], limit=3)
    assert json_depth_exceeds([{}, [{"a": {}}]], limit=3)
    assert not json_depth_exceeds([{}, [{"a": 1}]], limit=3)
