"""A zero window is no gate (issue 39 item 4): every duration that bounds a gate or an
expiry - a batch's and a throttle's ``window``, ``expires_after`` - must be longer than
0, refused at save naming node and field (``zero_duration``); the API answers 400 and
the throttle that stored ``window_ms`` 1 for "0s" cannot be saved. A send window whose
``from`` equals its ``until`` was already refused; a delay of 0 stays valid (it is no
gate: continue now)."""

from __future__ import annotations

import pytest

from tests.factories import batch_definition, email_sms_definition, throttle_definition
from workflows.definition import DefinitionError, validate_definition

ZEROS = ["0s", "PT0S", "0m", "0d0h0m0s", "P0D", "PT0.0S", "0h"]


def problems(definition) -> list[tuple]:
    with pytest.raises(DefinitionError) as info:
        validate_definition(definition)
    return [(p.node, p.field, p.code) for p in info.value.errors]


@pytest.mark.parametrize("zero", ZEROS)
def test_a_throttle_window_of_zero_is_refused_naming_it(zero):
    assert problems(throttle_definition(limit=1, window=zero)) == [
        ("gate", "nodes[0].config.window", "zero_duration")
    ]


@pytest.mark.parametrize("zero", ZEROS)
def test_a_batch_window_of_zero_is_refused_naming_it(zero):
    assert problems(batch_definition(window=zero)) == [
        ("collect", "nodes[0].config.window", "zero_duration")
    ]


@pytest.mark.parametrize("index", [0, 1])  # the email and the SMS node
def test_expires_after_of_zero_is_refused_naming_it(index):
    definition = email_sms_definition()
    definition["nodes"][index]["config"]["expires_after"] = "PT0S"
    node = definition["nodes"][index]["id"]
    assert problems(definition) == [(node, f"nodes[{index}].config.expires_after", "zero_duration")]


@pytest.mark.parametrize("window", ["1s", "PT0.5S", "0d1s", "PT1M"])
def test_the_shortest_positive_windows_are_accepted(window):
    assert validate_definition(throttle_definition(limit=1, window=window))
    assert validate_definition(batch_definition(window=window))


@pytest.mark.parametrize("empty", ["", " ", "P", "PT"])
def test_an_empty_window_is_refused(empty):
    assert problems(throttle_definition(window=empty)) == [
        ("gate", "nodes[0].config.window", "invalid_definition")
    ]


def test_a_delay_of_zero_is_still_a_valid_delay():
    definition = email_sms_definition(delay="0s")
    assert validate_definition(definition)


@pytest.mark.django_db
def test_the_api_refuses_a_zero_throttle_window_at_save(api):
    from workflows.models import Workflow

    body = {"key": "zero", "name": "Zero", "definition": throttle_definition(limit=1, window="0s")}
    response = api.post("/api/v1/workflows/", body, format="json")
    assert response.status_code == 400, response.content
    error = next(e for e in response.json()["errors"] if e["code"] == "zero_duration")
    assert error["field"] == "definition.nodes[0].config.window"
    assert "gate" in error["message"] and "'0s'" in error["message"]
    assert not Workflow.objects.filter(key="zero").exists()
