"""The proof of the node-type registry (``workflows.definition.node_types``): ``shout``,
a node type that exists only in the test suite (tests/executions/shout_node.py), goes
through every room a built-in type does - saved through the API (a bad config refused,
naming its field), described by the OpenAPI schema, previewed, run by the engine and by a
real worker that imports it through NOTIFYFLOW_NODE_MODULES, drawn in the console - and
nothing outside the tests names it."""

from __future__ import annotations

import importlib
import logging
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from django.http import HttpRequest
from django.test import Client
from django.urls import reverse

from executions import engine
from executions.checks import check_node_channels
from executions.outcomes import StepOutcome
from tests.admin_helpers import PASSWORD, make_superuser
from tests.worker import ROOT, celery_worker, flush_broker, wait_until
from triggers.models import OutboxEvent, TriggerInstance, TriggerStatus
from workflows.definition import NodeType, node_types
from workflows.models import Workflow

SHOUT_MODULE = "tests.executions.shout_node"
WORKFLOWS = "/api/v1/workflows/"


@pytest.fixture
def shout() -> Iterator[NodeType]:
    """The test-only type, registered for this test alone (importing the module registers
    it the first time; later tests register the same declaration again)."""
    module = importlib.import_module(SHOUT_MODULE)
    node_types.register(module.NODE)
    yield module.NODE
    node_types.unregister(module.NODE.name)


def never_run(step):
    raise AssertionError("never run")


def shout_workflow(*, times=2, key="yeller") -> dict:
    """A shout, then an emit whose context reads the shout's ``vars``."""
    return {
        "key": key,
        "name": "Yeller",
        "definition": {
            "entry_node_id": "yell",
            "nodes": [
                {
                    "id": "yell",
                    "type": "shout",
                    "config": {"text": "hi {{ payload.name }}", "times": times},
                },
                {
                    "id": "tell",
                    "type": "emit",
                    "config": {
                        "event": "shouted",
                        "context": {"said": "{{ vars.shout_yell.shout }}"},
                    },
                },
            ],
            "edges": [{"from": "yell", "to": "tell"}],
        },
    }


def test_the_setting_names_modules_every_process_imports_when_it_starts():
    """NOTIFYFLOW_NODE_MODULES (an environment variable): a new process registers the
    types of the modules it names after the built-in ones."""
    code = (
        "import django; django.setup(); "
        "from workflows.definition import node_types; print(','.join(node_types.names()))"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "NOTIFYFLOW_NODE_MODULES": SHOUT_MODULE,
    }
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    names = done.stdout.strip().splitlines()[-1].split(",")
    assert names[0] == "email" and names[-1] == "shout"


def test_a_type_sending_on_a_channel_preferences_do_not_know_fails_the_system_check():
    assert check_node_channels() == []
    node_types.register(
        NodeType(name="pigeon", description="", fields={}, run=never_run, channel="coo")
    )
    try:
        [error] = check_node_channels()
    finally:
        node_types.unregister("pigeon")
    assert error.id == "notifyflow.E011" and "'pigeon'" in error.msg and "'coo'" in error.msg


# --- the proof: a node type that exists only in the test suite ----------------------------


@pytest.mark.django_db
def test_a_test_only_node_type_is_saved_described_previewed_run_and_drawn(
    api, shout, dispatched, caplog
):
    # Saved through the API: a bad config is refused naming its field, with a stable code.
    too_many = api.post(WORKFLOWS, shout_workflow(times=9), format="json")
    assert too_many.status_code == 400
    error = too_many.json()
    assert error["field"] == "definition.nodes[0].config.times"
    assert error["code"] == "invalid_definition"
    assert "must be an integer from 1 to 5" in error["message"]
    silent = shout_workflow()
    del silent["definition"]["nodes"][0]["config"]["text"]
    error = api.post(WORKFLOWS, silent, format="json").json()
    assert (error["field"], error["code"]) == ("definition.nodes[0].config.text", "required")
    created = api.post(WORKFLOWS, shout_workflow(), format="json")
    assert created.status_code == 201, created.json()
    assert api.put(f"{WORKFLOWS}yeller/", shout_workflow(times=7), format="json").status_code == 400

    # Described by the OpenAPI schema, as registered when it is asked for.
    schema = Client().get("/api/schema/", HTTP_ACCEPT="application/json").json()
    components = schema["components"]["schemas"]
    config = components["ShoutNode"]["properties"]["config"]
    assert config["required"] == ["text"]
    assert config["properties"]["times"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 5,
        "description": "How many times (1-5; default 1).",
    }
    nodes = components["WorkflowDefinition"]["properties"]["nodes"]["items"]
    assert nodes["discriminator"]["mapping"]["shout"] == "#/components/schemas/ShoutNode"

    # Previewed: rendered, run, its output in vars for the next node.
    preview = api.post(
        f"{WORKFLOWS}yeller/preview/", {"payload": {"name": "Ada"}}, format="json"
    ).json()
    assert preview["path"] == ["yell", "tell"]
    yell, tell = preview["nodes"]
    assert yell["rendered"] == {"text": "hi Ada", "times": 2}
    assert yell["output"] == {"shout": "HI ADA! HI ADA!"}
    assert tell["error"] is None

    # Run by the engine: its vars, the next node's template reading them, its after-commit.
    trigger = {"workflow": "yeller", "idempotency_key": "k1", "payload": {"name": "Ada"}}
    instance_id = api.post("/api/v1/triggers/", trigger, format="json").json()["id"]
    with caplog.at_level(logging.INFO, logger="notifyflow.shout"):
        assert engine.step_execute(instance_id=instance_id) == StepOutcome.ADVANCED
    assert any("shouted at" in r.getMessage() for r in caplog.records)
    assert engine.step_execute(instance_id=instance_id) == StepOutcome.COMPLETED
    instance = TriggerInstance.objects.get(pk=instance_id)
    assert instance.vars["shout_yell"] == {"shout": "HI ADA! HI ADA!"}
    assert OutboxEvent.objects.get(instance=instance).context == {"said": "HI ADA! HI ADA!"}

    # Drawn in the console: its label, colour and summary on the workflow's page.
    client = Client()
    user = make_superuser()
    client.login(request=HttpRequest(), username=user.username, password=PASSWORD)
    workflow = Workflow.objects.get(key="yeller")
    body = client.get(reverse("admin:workflows_workflow_change", args=[workflow.pk])).content
    page = body.decode()
    start = page.index('class="nf-dag"')
    svg = page[start : page.index("</svg>", start)]
    assert 'data-node-id="yell"' in svg and "SHOUT!" in svg
    assert "#d81b60" in svg and "hi {{ payload.name }} ×2" in svg


@pytest.mark.django_db
def test_once_unregistered_the_type_is_refused_and_not_described(api, shout):
    node_types.unregister(shout.name)
    refused = api.post(WORKFLOWS, shout_workflow(), format="json")
    assert refused.status_code == 400
    error = refused.json()
    assert (error["field"], error["code"]) == ("definition.nodes[0].type", "invalid_node_type")
    assert "shout" not in error["message"]
    schema = Client().get("/api/schema/", HTTP_ACCEPT="application/json").json()
    assert "ShoutNode" not in schema["components"]["schemas"]


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_imports_the_test_only_type_by_setting_and_runs_it(tmp_path, api, shout):
    flush_broker()
    assert api.post(WORKFLOWS, shout_workflow(times=3), format="json").status_code == 201
    trigger = {"workflow": "yeller", "idempotency_key": "w1", "payload": {"name": "Bo"}}
    with celery_worker(tmp_path, NOTIFYFLOW_NODE_MODULES=SHOUT_MODULE):
        instance_id = api.post("/api/v1/triggers/", trigger, format="json").json()["id"]
        wait_until(
            lambda: TriggerInstance.objects.get(pk=instance_id).status == TriggerStatus.COMPLETED,
            timeout=120,
            what="the instance completed by the worker",
        )
    instance = TriggerInstance.objects.get(pk=instance_id)
    assert instance.vars["shout_yell"] == {"shout": "HI BO! HI BO! HI BO!"}
    log = (tmp_path / "worker-w1.log").read_text()
    assert f"shouted at {instance_id}:yell: HI BO! HI BO! HI BO!" in log
