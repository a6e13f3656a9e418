"""A ``batch`` node's ``schedule`` ({cron, timezone?}): exactly one of window and
schedule; a bad cron, one that never fires, or an unknown timezone is refused at save
naming the field with a stable code."""

from __future__ import annotations

import pytest

from tests.factories import batch_definition
from workflows.definition import DefinitionError, validate_definition
from workflows.definition_schema import definition_json_schema

WEEKDAYS_0900 = {"cron": "0 9 * * 1-5"}


def problems(definition) -> list[tuple]:
    with pytest.raises(DefinitionError) as info:
        validate_definition(definition)
    return [(p.node, p.field, p.code) for p in info.value.errors]


def test_a_schedule_instead_of_a_window_is_valid_and_kept_as_given():
    schedule = {"cron": "30 8 * * mon-fri", "timezone": "America/New_York"}
    clean = validate_definition(batch_definition(window=None, schedule=schedule))
    assert clean["nodes"][0]["config"] == {"schedule": schedule}
    assert validate_definition(batch_definition(window=None, schedule=WEEKDAYS_0900))


def test_exactly_one_of_window_and_schedule():
    both = batch_definition(window="1h", schedule=WEEKDAYS_0900)
    neither = batch_definition(window=None)
    assert problems(both) == problems(neither) == [("collect", "nodes[0].config", "invalid_batch")]


@pytest.mark.parametrize(
    "cron", ["0 9 * *", "61 9 * * *", "0 9 * * 8", "0 9 30 2 *", "every day", 900, ""]
)
def test_an_invalid_cron_is_refused_naming_the_field(cron):
    definition = batch_definition(window=None, schedule={"cron": cron})
    assert problems(definition) == [("collect", "nodes[0].config.schedule.cron", "invalid_cron")]


def test_an_unknown_timezone_a_missing_cron_and_an_unknown_key_are_named():
    schedule = {"timezone": "Mars/Olympus", "every": "day"}
    assert sorted(problems(batch_definition(window=None, schedule=schedule))) == [
        ("collect", "nodes[0].config.schedule.cron", "required"),
        ("collect", "nodes[0].config.schedule.every", "unknown_field"),
        ("collect", "nodes[0].config.schedule.timezone", "invalid_timezone"),
    ]


def test_a_schedule_that_is_not_an_object_is_refused():
    definition = batch_definition(window=None, schedule="0 9 * * 1-5")
    assert problems(definition) == [("collect", "nodes[0].config.schedule", "invalid_definition")]


def test_the_json_schema_describes_the_schedule():
    schema = definition_json_schema()
    batch = schema["$defs"]["BatchNode"]["properties"]["config"]
    assert batch["properties"]["schedule"]["required"] == ["cron"]
    assert {"required": ["schedule"]} in batch["oneOf"]
