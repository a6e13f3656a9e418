"""Bounded templates (issue 12 item 1): Liquid limits hit at run time fail the instance
permanently naming the node; caps on template length, node count and definition size at
save; a 1,000-node chain and a huge duration are validation errors, not 500s."""

from __future__ import annotations

import time

import pytest
from django.core import mail

from executions import engine
from executions.outcomes import StepOutcome
from tests.factories import TriggerInstanceFactory, WorkflowFactory, email_definition
from triggers.models import TriggerStatus
from workflows.definition import DefinitionError, validate_definition
from workflows.durations import parse_duration

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "body",
    [
        "{% for i in (1..1000000000) %}{% endfor %}",
        "{% assign s = 'xx' %}{% for i in (1..40) %}{% assign s = s | append: s %}{% endfor %}",
        "{% for i in (1..9000) %}{{ 'x' | append: 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' }}"
        "{% endfor %}",
    ],
    ids=["loop", "namespace", "output"],
)
def test_template_over_a_limit_fails_the_instance_permanently_naming_the_node(
    body, settings, dispatched
):
    settings.NOTIFYFLOW_TEMPLATE_OUTPUT_LIMIT = 64 * 1024
    instance = TriggerInstanceFactory(workflow=WorkflowFactory(definition=email_definition(body)))
    started = time.monotonic()
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.FAILED_PERMANENT
    assert time.monotonic() - started < 5
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.FAILED and instance.attempts == 1
    assert instance.last_error.startswith("node mail: body: template error:")
    assert "limit" in instance.last_error
    assert mail.outbox == []


def test_template_limits_come_from_settings(settings, dispatched):
    body = "{% for i in (1..50) %}x{% endfor %}"
    instance = TriggerInstanceFactory(workflow=WorkflowFactory(definition=email_definition(body)))
    settings.NOTIFYFLOW_TEMPLATE_LOOP_LIMIT = 10
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.FAILED_PERMANENT


def test_template_longer_than_the_cap_is_refused_at_save(settings):
    settings.NOTIFYFLOW_TEMPLATE_MAX_LENGTH = 100
    with pytest.raises(DefinitionError) as caught:
        validate_definition(email_definition("x" * 101))
    assert caught.value.field == "definition.nodes[0].config.body"
    assert caught.value.code == "too_long"


def test_too_many_nodes_is_refused_at_save(settings):
    settings.NOTIFYFLOW_DEFINITION_MAX_NODES = 3
    nodes = [{"id": f"n{i}", "type": "delay", "config": {"delay_ms": 1}} for i in range(4)]
    with pytest.raises(DefinitionError) as caught:
        validate_definition({"entry_node_id": "n0", "nodes": nodes, "edges": []})
    assert caught.value.code == "too_many_nodes"


def test_oversized_definition_is_refused_at_save(settings):
    settings.NOTIFYFLOW_DEFINITION_MAX_BYTES = 1000
    with pytest.raises(DefinitionError) as caught:
        validate_definition(email_definition("x" * 2000))
    assert caught.value.code == "definition_too_large"


def test_thousand_node_chain_is_a_validation_error_not_a_recursion_error(settings):
    settings.NOTIFYFLOW_DEFINITION_MAX_NODES = 5000
    n = 1000
    chain = {
        "entry_node_id": "n0",
        "nodes": [{"id": f"n{i}", "type": "delay", "config": {"delay_ms": 1}} for i in range(n)],
        "edges": [{"from": f"n{i}", "to": f"n{i + 1}"} for i in range(n - 1)],
    }
    assert len(validate_definition(chain)["nodes"]) == n
    chain["edges"].append({"from": f"n{n - 1}", "to": "n0"})
    with pytest.raises(DefinitionError) as caught:
        validate_definition(chain)
    assert caught.value.code == "cycle"


def test_thousand_node_chain_is_400_through_the_api(api):
    n = 1000
    body = {
        "key": "chain",
        "name": "chain",
        "definition": {
            "entry_node_id": "n0",
            "nodes": [
                {"id": f"n{i}", "type": "delay", "config": {"delay_ms": 1}} for i in range(n)
            ],
            "edges": [{"from": f"n{i}", "to": f"n{i + 1}"} for i in range(n - 1)],
        },
    }
    response = api.post("/api/v1/workflows/", body, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "too_many_nodes"


@pytest.mark.parametrize("text", ["9999999999d", "P99999999999999999999W", "3651d"])
def test_huge_duration_is_a_validation_error(text):
    with pytest.raises(ValueError, match="longer than the maximum"):
        parse_duration(text)
    definition = {
        "entry_node_id": "d",
        "nodes": [{"id": "d", "type": "delay", "config": {"duration": text}}],
        "edges": [],
    }
    with pytest.raises(DefinitionError) as caught:
        validate_definition(definition)
    assert caught.value.field == "definition.nodes[0].config.duration"


def test_huge_delay_ms_is_a_validation_error():
    definition = {
        "entry_node_id": "d",
        "nodes": [{"id": "d", "type": "delay", "config": {"delay_ms": 10**30}}],
        "edges": [],
    }
    with pytest.raises(DefinitionError) as caught:
        validate_definition(definition)
    assert caught.value.field == "definition.nodes[0].config.delay_ms"


def test_huge_duration_through_the_api_is_400(api):
    body = {
        "key": "long",
        "name": "long",
        "definition": {
            "entry_node_id": "d",
            "nodes": [{"id": "d", "type": "delay", "config": {"duration": "9999999999d"}}],
            "edges": [],
        },
    }
    response = api.post("/api/v1/workflows/", body, format="json")
    assert response.status_code == 400
    assert response.json()["field"] == "definition.nodes[0].config.duration"


def test_definition_nested_too_deep_is_a_validation_error():
    context: dict = {}
    for _ in range(100):
        context = {"a": context}
    definition = {
        "entry_node_id": "e",
        "nodes": [{"id": "e", "type": "emit", "config": {"event": "x", "context": context}}],
        "edges": [],
    }
    with pytest.raises(DefinitionError) as caught:
        validate_definition(definition)
    assert caught.value.code == "too_deep"
