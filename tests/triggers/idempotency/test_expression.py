"""The #{...} evaluator of CUSTOM_EXPRESSION: grammar, errors, and a fuzz proving it never
raises anything but ExpressionError."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from triggers.idempotency import ExpressionError, MissingValueError, parse_template

CTX = {
    "roleId": "admin",
    "organizationId": 9,
    "user": {"id": "u1", "tags": ["a", "b"]},
    "with space": "s",
    "flag": False,
    "nothing": None,
}


def render(text: str, context=None, *, fail_on_missing=False, event_id="ev1") -> str:
    return parse_template(text).render(
        trigger_id=42,
        event_name="EVT",
        event_id=event_id,
        context=CTX if context is None else context,
        fail_on_missing=fail_on_missing,
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("#{triggerId}_#{ctx['roleId']}_#{ctx['organizationId']}", "42_admin_9"),
        ("#{eventName}/#{eventId}", "EVT/ev1"),
        ("#{ctx.user.id}", "u1"),
        ('#{ctx["user"]["id"]}', "u1"),
        ("#{ctx['user'].tags[1]}", "b"),
        ("#{ctx.user.tags[-1]}", "b"),
        ("#{ ctx [ 'user' ] . id }", "u1"),
        ("#{ctx['with space']}", "s"),
        ("#{ctx.flag}", "false"),
        ("#{ctx.user}", '{"id":"u1","tags":["a","b"]}'),
        ("literal only", "literal only"),
        ("# { } } #x #", "# { } } #x #"),
        ("a#{ctx.roleId}b#{ctx.roleId}c", "aadminbadminc"),
        (r"#{ctx['it\'s']}", "null"),
        ("#{ctx['a}b']}", "null"),
    ],
)
def test_expressions_render(text, expected):
    assert render(text) == expected


def test_integer_subscript_of_a_mapping_reads_the_string_key():
    assert render("#{ctx[3]}", {"3": "three"}) == "three"


@pytest.mark.parametrize(
    "text",
    [
        "#{ctx.missing}",
        "#{ctx.user.missing}",
        "#{ctx.user.tags[5]}",
        "#{ctx.nothing}",
        "#{ctx.nothing.deeper}",
    ],
)
def test_missing_values_render_null_or_fail(text):
    assert render(text).endswith("null")
    with pytest.raises(MissingValueError):
        render(text, fail_on_missing=True)


def test_missing_event_id_renders_null_or_fails():
    assert render("e_#{eventId}", event_id=None) == "e_null"
    with pytest.raises(MissingValueError):
        render("e_#{eventId}", event_id=None, fail_on_missing=True)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("#{ctx['a'", "expected ']'"),
        ("#{ctx", "missing '}'"),
        ("#{", "expected a name"),
        ("#{}", "expected a name"),
        ("#{os}", "unknown variable 'os'"),
        ("#{__import__('os')}", "unknown variable '__import__'"),
        ("#{ctx.__class__.__mro__}", None),
        ("#{ctx()}", "unexpected '('"),
        ("#{ctx['a'] + 'b'}", "unexpected '+'"),
        ("#{triggerId.real}", "only ctx can be indexed"),
        ("#{eventName[0]}", "only ctx can be indexed"),
        ("#{ctx[abc]}", "expected a quoted key or an integer index"),
        ("#{ctx['unterminated}", "unterminated string"),
        ("#{ctx.1}", "expected a name"),
        ("#{ctx[99999999999]}", "index too large"),
    ],
)
def test_anything_else_is_a_parse_error(text, message):
    if text == "#{ctx.__class__.__mro__}":
        # Parses (names are mapping keys), but reads keys, never attributes.
        assert render(text) == "null"
        return
    with pytest.raises(ExpressionError) as info:
        parse_template(text)
    assert message in str(info.value)
    assert "at position" in str(info.value)


def test_indexing_a_scalar_is_an_evaluation_error():
    with pytest.raises(ExpressionError, match="cannot read 'x' from a text value"):
        render("#{ctx.roleId.x}")
    with pytest.raises(ExpressionError, match="cannot read 'x' from a list"):
        render("#{ctx.user.tags.x}")


def test_an_empty_result_is_an_error():
    with pytest.raises(ExpressionError, match="empty key"):
        render("#{ctx.e}", {"e": ""})


def test_non_string_expression_is_an_expression_error():
    with pytest.raises(ExpressionError):
        parse_template(None)


# --- fuzz -----------------------------------------------------------------------------

GRAMMAR_ALPHABET = "#{}[]'\".\\ -_0123456789abctxIdeEvnNmrg"
json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)
KEYS = st.sampled_from(["a", "b", "user", "0", "1", ""])
# Values keyed by the names the structured templates below use, so paths really resolve.
keyed_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(KEYS | st.text(max_size=3), children, max_size=4)
    ),
    max_leaves=20,
)
contexts = st.dictionaries(KEYS | st.text(max_size=5), keyed_values, max_size=5)
accessors = st.lists(
    st.sampled_from(
        [
            ".a",
            ".b",
            ".user",
            "['a']",
            '["user"]',
            "[0]",
            "[1]",
            "[-1]",
            "['0']",
            "[ 'b' ]",
        ]
    ),
    max_size=5,
).map("".join)
placeholders = st.builds(
    lambda root, path: "#{" + root + path + "}",
    st.sampled_from(["ctx", "ctx", "ctx", "triggerId", "eventId"]),
    accessors,
)
templates = (
    st.lists(placeholders | st.text(max_size=4), min_size=1, max_size=4).map("".join)
    | st.text(max_size=60)
    | st.text(alphabet=GRAMMAR_ALPHABET, max_size=60)
    | st.lists(
        st.sampled_from(
            [
                "#{",
                "}",
                "ctx",
                ".a",
                ".user",
                "['a']",
                '["b"]',
                "[0]",
                "[-1]",
                "[",
                "]",
                "'",
                '"',
                "triggerId",
                "eventName",
                "eventId",
                "x",
                " ",
                "\\",
                ".",
                "#",
            ]
        ),
        max_size=12,
    ).map("".join)
)


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=templates,
    context=contexts | keyed_values,
    event_id=st.none() | st.text(max_size=5),
    fail=st.booleans(),
)
def test_fuzz_parse_and_render_raise_only_expression_error(text, context, event_id, fail):
    try:
        template = parse_template(text)
    except ExpressionError:
        return
    except Exception as exc:  # pragma: no cover - the property under test
        pytest.fail(f"parse_template({text!r}) raised {exc!r}")
    try:
        result = template.render(
            trigger_id=1, event_name="E", event_id=event_id, context=context, fail_on_missing=fail
        )
    except ExpressionError:
        return
    except Exception as exc:  # pragma: no cover - the property under test
        pytest.fail(f"render of {text!r} with {context!r} raised {exc!r}")
    assert isinstance(result, str) and result.strip()


@settings(max_examples=300)
@given(
    path=st.lists(st.text(alphabet="abc'\"\\]} ", min_size=1, max_size=6), min_size=1, max_size=4),
    value=json_scalars,
)
def test_fuzz_any_quoted_key_round_trips(path, value):
    """Any key, quoted with escapes, reads exactly that key."""
    quoted = "".join("['" + k.replace("\\", "\\\\").replace("'", "\\'") + "']" for k in path)
    context: object = value
    for name in reversed(path):
        context = {name: context}
    rendered = parse_template("v=#{ctx" + quoted + "}").render(
        trigger_id=1, event_name="E", event_id=None, context=context
    )
    expected = "null" if value is None else (value if isinstance(value, str) else None)
    if expected is not None:
        assert rendered == "v=" + expected
    else:
        assert rendered.startswith("v=") and rendered != "v=null"
