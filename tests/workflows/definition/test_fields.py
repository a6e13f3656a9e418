"""``send_window`` and ``expires_after`` on email and SMS nodes: what validation accepts
and how it names what it refuses."""

from __future__ import annotations

import jsonschema
import pytest

from tests.factories import email_sms_definition
from workflows.definition import DefinitionError, node_types, validate_definition
from workflows.definition_schema import definition_json_schema

WINDOW = {"days": ["mon", "fri"], "from": "09:00", "until": "17:00", "timezone": "recipient"}
SCHEMA = jsonschema.Draft202012Validator(definition_json_schema())


def with_config(index: int = 0, **config) -> dict:
    """The email (index 0) or SMS (index 1) node of the factory definition, with ``config``."""
    definition = email_sms_definition()
    definition["nodes"][index]["config"].update(config)
    return definition


def problems(definition: dict) -> list[tuple]:
    with pytest.raises(DefinitionError) as info:
        validate_definition(definition)
    return [(p.node, p.field, p.code) for p in info.value.errors]


@pytest.mark.parametrize("index", [0, 1])
def test_a_send_window_and_expires_after_are_accepted_on_email_and_sms(index):
    definition = with_config(index, send_window=WINDOW, expires_after="2h")
    clean = validate_definition(definition)
    config = clean["nodes"][index]["config"]
    assert (config["send_window"], config["expires_after"]) == (WINDOW, "2h")
    SCHEMA.validate(clean)


@pytest.mark.parametrize(
    "window",
    [
        WINDOW | {"timezone": "Europe/Paris"},
        WINDOW | {"from": "22:00", "until": "06:00"},  # wraps midnight
        WINDOW | {"from": "00:00", "until": "23:59"},
        WINDOW | {"days": ["sun", "sat", "fri", "thu", "wed", "tue", "mon"]},
    ],
)
def test_valid_send_windows(window):
    SCHEMA.validate(validate_definition(with_config(send_window=window)))


@pytest.mark.parametrize(
    ("change", "field", "code"),
    [
        ({"days": []}, "days", "invalid_definition"),
        ({"days": ["mon", "mon"]}, "days", "invalid_definition"),
        ({"days": ["monday"]}, "days", "invalid_definition"),
        ({"days": "mon"}, "days", "invalid_definition"),
        ({"days": [1]}, "days", "invalid_definition"),
        ({"from": "24:00"}, "from", "invalid_definition"),
        ({"from": "9:00"}, "from", "invalid_definition"),
        ({"until": "17:60"}, "until", "invalid_definition"),
        ({"until": 1700}, "until", "invalid_definition"),
        ({"until": "09:00"}, "until", "invalid_definition"),  # equal to from
        ({"timezone": "Mars/Olympus"}, "timezone", "invalid_definition"),
        ({"timezone": "America"}, "timezone", "invalid_definition"),
        ({"timezone": "../etc/passwd"}, "timezone", "invalid_definition"),
        ({"timezone": ""}, "timezone", "invalid_definition"),
        ({"hours": 3}, "hours", "unknown_field"),
    ],
)
def test_a_wrong_send_window_field_names_the_node_and_the_field(change, field, code):
    found = problems(with_config(send_window=WINDOW | change))
    assert found == [("hello", f"nodes[0].config.send_window.{field}", code)]


@pytest.mark.parametrize("missing", ["days", "from", "until", "timezone"])
def test_each_send_window_field_is_required(missing):
    window = {k: v for k, v in WINDOW.items() if k != missing}
    found = problems(with_config(1, send_window=window))
    assert found == [("text", f"nodes[1].config.send_window.{missing}", "required")]


@pytest.mark.parametrize("window", ["mon-fri 9-17", ["mon"], 3])
def test_a_send_window_must_be_an_object(window):
    assert problems(with_config(send_window=window)) == [
        ("hello", "nodes[0].config.send_window", "invalid_definition")
    ]


@pytest.mark.parametrize("expires_after", ["soon", "", 3600, "9999d"])
def test_a_wrong_expires_after_names_the_node_and_the_field(expires_after):
    assert problems(with_config(1, expires_after=expires_after)) == [
        ("text", "nodes[1].config.expires_after", "invalid_definition")
    ]


def test_every_problem_is_reported_at_once():
    window = {"days": [], "from": "25:00", "until": "x", "timezone": "Nowhere", "extra": 1}
    fields = [field for _node, field, _code in problems(with_config(send_window=window))]
    assert sorted(fields) == sorted(
        f"nodes[0].config.send_window.{key}"
        for key in ("extra", "days", "from", "until", "timezone")
    )


@pytest.mark.parametrize("node_type", ["delay", "wait", "emit", "webhook"])
def test_other_node_types_have_no_send_window(node_type):
    assert "send_window" not in node_types.get(node_type).fields
    assert "expires_after" not in node_types.get(node_type).fields


def test_the_api_names_the_field_of_a_wrong_send_window(api):
    body = {
        "key": "windowed",
        "name": "Windowed",
        "definition": with_config(send_window=WINDOW | {"from": "7am"}),
    }
    answer = api.post("/api/v1/workflows/", body, format="json")
    assert answer.status_code == 400
    error = answer.json()
    assert error["field"] == "definition.nodes[0].config.send_window.from"
    assert "'hello'" in error["message"]
