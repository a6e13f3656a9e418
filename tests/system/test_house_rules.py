"""The house rules of the layers issue, each as behaviour: races end in 4xx, a KeyError
from inside a node is not "node missing", settings refuse typos, caches have one reset;
and tests follow the code: every module that carries logic has its test module, and no
test patches a private name."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import threading
import tomllib
from datetime import timedelta

import pytest
import requests
from django.utils import timezone

from executions import engine
from executions.outcomes import StepOutcome
from notifyflow import caching
from notifyflow.errors import ConflictError
from tests.factories import PAYLOAD, TriggerInstanceFactory, WorkflowFactory, email_sms_definition
from triggers.models import TriggerInstance, TriggerStatus, TriggerStatusChange
from triggers.services import instance_run_now, trigger_create, workflows_by_key
from workflows.definition import node_types
from workflows.services import workflow_save

pytestmark = pytest.mark.both_databases

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_workflow_posts_with_one_key_give_one_201(live_server):
    from api_keys.services import api_key_create

    raw = api_key_create(name="race")[1]
    body = {"key": "raced", "name": "Raced", "definition": email_sms_definition()}
    barrier = threading.Barrier(20)
    statuses: list[int] = []
    codes: list[str] = []
    lock = threading.Lock()

    def fire() -> None:
        session = requests.Session()
        session.get(f"{live_server.url}/healthz", timeout=30)
        barrier.wait()
        response = session.post(
            f"{live_server.url}/api/v1/workflows/",
            json=body,
            headers={"Authorization": f"Bearer {raw}"},
            timeout=30,
        )
        with lock:
            statuses.append(response.status_code)
            if response.status_code != 201:
                codes.append(response.json()["code"])

    threads = [threading.Thread(target=fire) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == [201] + [409] * 19, statuses
    assert set(codes) == {"duplicate_key"}


@pytest.mark.django_db
def test_a_keyerror_inside_a_node_is_a_transient_failure_not_a_missing_node(
    monkeypatch, dispatched
):
    def broken(step):
        raise KeyError("provider_field")

    monkeypatch.setattr(node_types.get("email"), "run", broken)
    instance = TriggerInstanceFactory(workflow=WorkflowFactory())
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.FAILED_TRANSIENT
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.ENQUEUED and instance.attempts == 1
    assert "not in version" not in instance.last_error


@pytest.mark.django_db
def test_a_node_missing_from_the_version_fails_permanently(dispatched):
    instance = TriggerInstanceFactory(workflow=WorkflowFactory(), current_node_id="ghost")
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.FAILED_PERMANENT
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.FAILED
    assert "'ghost' is not in version" in instance.last_error


@pytest.mark.django_db
def test_run_now_is_audited_through_the_transition_table(dispatched):
    instance = TriggerInstanceFactory(
        workflow=WorkflowFactory(), available_at=timezone.now() + timedelta(hours=1)
    )
    assert instance_run_now(instance_id=instance.pk, actor="bob")
    change = TriggerStatusChange.objects.get(instance=instance, actor="bob")
    assert (change.from_status, change.to_status) == ("enqueued", "enqueued")
    with pytest.raises(ConflictError, match="already due"):
        instance_run_now(instance_id=instance.pk, actor="bob")


@pytest.mark.parametrize(
    "env",
    [
        {"NOTIFYFLOW_KOMBU_TIMER_FIX": "ture"},
        {"NOTIFYFLOW_LEASE_S": "ninety"},
        {"NOTIFYFLOW_LEASE_S": "20"},  # below the hard time limit
    ],
)
def test_bad_settings_refuse_to_start_even_under_python_O(env):
    code = "import django; from django.conf import settings; settings.NOTIFYFLOW_LEASE_S"
    result = subprocess.run(
        [sys.executable, "-O", "-c", code],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "notifyflow.settings", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert next(iter(env)) in result.stderr


@pytest.mark.django_db
def test_saving_a_workflow_drops_the_process_cache_and_clear_all_empties_every_cache():
    workflow = WorkflowFactory()
    trigger_create(workflow=workflow.key, idempotency_key="k1", payload=PAYLOAD)
    assert workflows_by_key.get(workflow.key) is not None
    workflow_save(key=workflow.key, name="renamed", definition=email_sms_definition())
    assert workflows_by_key.get(workflow.key) is None
    workflows_by_key.put("x", workflow)
    caching.clear_all()
    assert workflows_by_key.get("x") is None


@pytest.mark.django_db
def test_the_trigger_input_serializer_is_the_schema_and_the_validation(api, workflow):
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    body = schema["components"]["schemas"]["TriggerCreateInput"]
    assert set(body["required"]) == {"workflow", "idempotency_key"}
    assert body["properties"]["idempotency_key"]["maxLength"] == 255
    response = api.post(
        "/api/v1/triggers/",
        {"workflow": workflow.key, "idempotency_key": "k" * 256, "payload": {}},
        format="json",
    )
    assert response.status_code == 400 and response.json()["code"] == "too_long"
    assert not TriggerInstance.objects.exists()


# --- tests follow the code -------------------------------------------------------------
# A module carries logic when one of its functions or methods has more than
# LOGIC_STATEMENTS statements (every statement of its body at any depth, docstring not
# counted); apps.py, admin.py, urls.py, settings.py, wsgi.py, migrations and an app's own
# __init__.py never do. Its test module mirrors its path (CONTRIBUTING, "Tests"):
# <app>/<package>/<module>.py -> tests/<app>/<package>/test_<module>.py; a package's
# __init__.py -> test_<package>.py beside the package's directory; an API resource's view
# and serializers (api/views/<r>.py, api/serializers/<r>.py) -> tests/api/test_<r>.py.

LOGIC_STATEMENTS = 8
THIN_MODULES = {"apps.py", "admin.py", "urls.py", "settings.py", "wsgi.py"}
# Logic-carrying modules without a test module of their own, each with why.
UNTESTED_BY_NAME: dict[str, str] = {
    "api/base.py": "the views' plumbing: tests/api/test_body_limits.py, test_strict_input.py",
    "api/feed_auth.py": "recipient tokens, through the feed endpoints: tests/api/test_feed.py",
    "api/pagination.py": "through the list endpoints: tests/api/test_triggers.py, test_lists.py",
    "api/schema.py": "the served schema, whole: tests/api/test_openapi_definition.py",
    "console/instances/actions.py": "the instance admin's: tests/console/instances/test_pages.py",
    "console/instances/columns.py": "the instance admin's: tests/console/test_instances.py",
    "console/instances/detail.py": "the instance admin's: tests/console/test_instances.py",
    "console/support.py": "through the changelists it serves: tests/console/test_instances.py",
    "executions/erasure_scrub.py": "half of recipient_erase: tests/executions/test_erasure.py",
    "executions/selectors.py": "API reads: tests/api/test_timeline.py, test_workflow_stats.py",
    "executions/step.py": "the context every node reads: tests/executions/test_engine.py, nodes/",
    "executions/tasks.py": "thin Celery tasks, run by real workers in tests/system/",
    "notifyflow/broker/sift.py": "through its one caller: tests/triggers/test_stale_messages.py",
    "triggers/selectors.py": "through trigger_create and /readyz: tests/api/test_health.py",
    "workflows/definition_schema.py": "vs the validator: tests/api/test_openapi_definition.py",
}


def _apps() -> list[str]:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["tool"]["importlinter"]["root_packages"]


def _statements(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    body = function.body
    count = sum(isinstance(node, ast.stmt) for statement in body for node in ast.walk(statement))
    docstring = isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
    return count - int(docstring and isinstance(body[0].value.value, str))


def carries_logic(path: str) -> bool:
    with open(os.path.join(ROOT, path)) as f:
        tree = ast.parse(f.read())
    functions = (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))
    return any(_statements(function) > LOGIC_STATEMENTS for function in functions)


def mirror_test_module(path: str) -> str:
    """Where the tests of product module ``path`` (relative to the checkout) live."""
    parts = path.removesuffix(".py").split("/")
    if parts[-1] == "__init__":
        parts.pop()
    if parts[0] == "api" and len(parts) == 3 and parts[1] in ("views", "serializers"):
        parts = ["api", parts[2]]
    return "/".join(["tests", *parts[:-1], f"test_{parts[-1]}.py"])


def logic_modules() -> list[str]:
    found = []
    for app in _apps():
        for directory, subdirectories, files in os.walk(os.path.join(ROOT, app)):
            subdirectories[:] = [
                d for d in subdirectories if d not in ("migrations", "__pycache__")
            ]
            for name in files:
                path = os.path.relpath(os.path.join(directory, name), ROOT)
                own_init = path == f"{app}/__init__.py"
                if name.endswith(".py") and name not in THIN_MODULES and not own_init:
                    if carries_logic(path):
                        found.append(path)
    return sorted(found)


def test_every_module_that_carries_logic_has_a_test_module_named_after_it():
    modules = logic_modules()
    assert len(modules) > 50  # the walk found the apps
    missing = [
        f"{path} -> {mirror_test_module(path)}"
        for path in modules
        if not os.path.exists(os.path.join(ROOT, mirror_test_module(path)))
        and path not in UNTESTED_BY_NAME
    ]
    assert not missing, "modules carrying logic without their test module:\n" + "\n".join(missing)


def test_the_list_of_modules_without_a_test_module_holds_only_what_still_needs_it():
    modules = set(logic_modules())
    stale = [
        path
        for path in UNTESTED_BY_NAME
        if path not in modules or os.path.exists(os.path.join(ROOT, mirror_test_module(path)))
    ]
    assert not stale, f"remove from UNTESTED_BY_NAME (gone, no logic, or now tested): {stale}"


def _private(name: object) -> bool:
    return isinstance(name, str) and name.startswith("_") and not name.startswith("__")


def _called(call: ast.Call) -> str:
    """The called name: ``setattr`` of ``monkeypatch.setattr``, ``patch`` of ``patch``."""
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return call.func.id if isinstance(call.func, ast.Name) else ""


def private_patches(source: str) -> list[int]:
    """Lines of ``source`` that replace a private name of another object: ``setattr`` /
    ``monkeypatch.setattr`` / ``mock.patch`` / ``patch.object`` / ``delattr`` naming
    ``obj, "_name"`` or ``"module._name"``, and ``module._name = ...`` (``self``/``cls``
    excepted: an object's own attributes)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and node.args:
            called = _called(node)
            if called in ("setattr", "delattr", "patch", "object", "setitem"):
                values = [a.value if isinstance(a, ast.Constant) else None for a in node.args[:2]]
                dotted = isinstance(values[0], str) and "." in values[0]
                if (dotted and _private(values[0].rsplit(".", 1)[1])) or (
                    called != "setitem" and len(values) > 1 and _private(values[1])
                ):
                    lines.append(node.lineno)
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            if isinstance(target, ast.Attribute) and _private(target.attr):
                owner = target.value
                if not (isinstance(owner, ast.Name) and owner.id in ("self", "cls")):
                    lines.append(node.lineno)
    return sorted(lines)


def test_private_patches_are_found():
    """The scanner of the next test catches each way of patching a private name."""
    caught = """
monkeypatch.setattr(fanout, "_batch", one)
monkeypatch.setattr("status_webhooks.outbox._last_kick", 0.0)
mock.patch("triggers.fanout._batch")
mock.patch.object(fanout, "_batch")
fanout._batch = one
"""
    allowed = """
monkeypatch.setattr(fanout, "BATCH", one)
monkeypatch.setattr("triggers.dispatch.send_task_on_commit", record)
self._lock = threading.Lock()
monkeypatch.setitem(EXECUTORS, "_x", broken)
"""
    assert private_patches(caught) == [2, 3, 4, 5, 6]
    assert private_patches(allowed) == []


def test_no_test_patches_a_private_name():
    """Tests go through a module's contract: a setting, a public function or parameter,
    a fake server. Patching ``module._name`` ties a test to what may change freely."""
    found = []
    for directory, _, files in os.walk(os.path.join(ROOT, "tests")):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(directory, name)
                with open(path) as f:
                    source = f.read()
                try:
                    lines = private_patches(source)
                except SyntaxError:
                    continue  # pytest reports it when it collects the file
                found += [f"{os.path.relpath(path, ROOT)}:{line}" for line in lines]
    assert not found, "patches of private names:\n" + "\n".join(found)
