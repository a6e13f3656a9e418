"""What text may be: an id or key is printable (no control, bidirectional control or
lone surrogate character, each named by its code) and not blank; a stored JSON value
holds no NUL, lone surrogate or non-finite number, keys included, the first one named
by its path."""

from __future__ import annotations

import json
import re

import pytest

from notifyflow.errors import ApplicationError
from notifyflow.text import (
    KEY_PATTERN,
    check_storable,
    dumped_storable,
    key_pattern,
    printable,
    printable_problem,
    text_storable,
)


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("a\x00b", "nul_character"),
        ("line\nbreak", "control_character"),
        ("tab\there", "control_character"),
        ("evil\u202eadmin", "bidi_control"),
        ("half \ud83d", "lone_surrogate"),
    ],
)
def test_an_id_with_a_character_no_key_may_hold_is_named_by_its_code(text, code):
    assert not printable(text)
    found = printable_problem(text)
    assert found is not None and found[0] == code


@pytest.mark.parametrize("text", ["user-1", "Ada Lovelace", "ünïcødé ✉", "😀 emoji"])
def test_any_script_emoji_and_inner_spaces_are_printable(text):
    assert printable(text) and printable_problem(text) is None
    assert re.fullmatch(KEY_PATTERN, text)


def test_the_key_pattern_refuses_blank_keys_and_excluded_characters():
    assert not re.fullmatch(KEY_PATTERN, "   ")
    assert not re.fullmatch(KEY_PATTERN, "a\nb")
    assert re.fullmatch(key_pattern("/"), "a-b") and not re.fullmatch(key_pattern("/"), "a/b")


@pytest.mark.parametrize(
    ("value", "field", "code"),
    [
        ({"a": [1, {"b": "x\x00"}]}, "a[1].b", "nul_character"),
        ({"a": {"bad\ud800key": 1}}, "a", "lone_surrogate"),
        ({"n": float("nan")}, "n", "invalid_number"),
        ("\x00", "body", "nul_character"),
    ],
)
def test_an_unstorable_value_is_refused_naming_its_path(value, field, code):
    with pytest.raises(ApplicationError) as refused:
        check_storable(value)
    assert (refused.value.field, refused.value.code) == (field, code)


def test_storable_values_pass_and_the_fast_check_agrees():
    value = {"name": "Ada 😀", "n": [1, 2.5, None, True], "nested": {"k": "NaN as text"}}
    check_storable(value)
    assert text_storable("Ada 😀") and not text_storable("a\x00")
    assert dumped_storable(json.dumps({"a": 1}))
    # "NaN" inside a string is a false alarm: the caller asks check_storable then.
    assert not dumped_storable(json.dumps(value))
    assert not dumped_storable(json.dumps({"a": "\x00"}))
