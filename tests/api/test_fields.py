"""The one rule for ids and keys (api.fields): printable text. Every C0 and C1
control character and DEL, the line and paragraph separators, every bidi control and
every lone surrogate is refused with its code; any other character - letters of any
script, emoji (a valid surrogate pair is one character), inner spaces - is fine. The
schema's pattern is the same set."""

from __future__ import annotations

import re

import pytest
from rest_framework.exceptions import ValidationError

from api.fields import KeyField, StrictSlugField
from notifyflow.text import KEY_PATTERN, PRINTABLE_PATTERN, printable, printable_problem

BIDI = [0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
CONTROLS = [*range(0x01, 0x20), *range(0x7F, 0xA0), 0x2028, 0x2029]


def _code(point: int) -> str | None:
    problem = printable_problem(f"ab{chr(point)}cd")
    return problem[0] if problem else None


def test_each_refused_character_has_its_code():
    assert _code(0) == "nul_character"
    assert {_code(p) for p in CONTROLS} == {"control_character"}
    assert {_code(p) for p in BIDI} == {"bidi_control"}
    assert {_code(p) for p in (0xD800, 0xDBFF, 0xDC00, 0xDFFF)} == {"lone_surrogate"}


def test_every_other_character_of_the_bmp_is_printable():
    refused = {0, *CONTROLS, *BIDI, *range(0xD800, 0xE000)}
    accepted = [chr(p) for p in range(0x10000) if p not in refused]
    assert printable("".join(accepted))
    assert printable("user 1 é 用户 \U0001f600 a\u200db")  # ZWJ joins emoji: kept


def test_the_schema_patterns_say_the_same():
    for pattern in (PRINTABLE_PATTERN, KEY_PATTERN):
        compiled = re.compile(pattern)
        assert compiled.search("user-1 é \U0001f600")
        for point in (0, *CONTROLS, *BIDI):
            assert not compiled.search(f"a{chr(point)}b"), (pattern, hex(point))
    assert not re.search(KEY_PATTERN, "   ") and re.search(PRINTABLE_PATTERN, "   ")


@pytest.mark.parametrize("field", [KeyField(), StrictSlugField()])
def test_key_and_slug_fields_refuse_what_is_not_printable_never_trim_it(field):
    with pytest.raises(ValidationError) as caught:
        field.run_validation("welcome\n")
    assert caught.value.detail[0].code == "control_character"
    assert field.run_validation("welcome") == "welcome"
