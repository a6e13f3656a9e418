"""The bench tools all run: every bench module imports under the bench's settings, every
project name it imports or reads off an imported module - at the top or inside a
function, where the entry points import after ``django.setup()`` - exists, and every
``python -m bench.<module>`` entry point parses its arguments (``--help``). A helper
moved without its callers (``bench.scenarios.wait_terminal`` once) fails here, not in
the next bench run.

The bench's peers need their own packages (dbos, procrastinate), installed only where
they run: their modules are skipped, naming the package, when it is missing.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import ssl
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
PROJECT = {
    "bench",
    "tests",
    *tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"],
}
# Entry points that take no options: what runs them instead of --help.
NO_OPTIONS = {"bench.push_fakes": "its one argument is a directory: run for real below"}


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def bench_modules() -> list[str]:
    return sorted(module_name(p) for p in BENCH.rglob("*.py") if "__pycache__" not in p.parts)


def entry_points() -> list[str]:
    return sorted(
        module_name(p) for p in BENCH.rglob("*.py") if 'if __name__ == "__main__":' in p.read_text()
    )


def _ours(module: str | None) -> bool:
    return module is not None and module.split(".")[0] in PROJECT


def _resolves(module: str, name: str) -> bool:
    if hasattr(importlib.import_module(module), name):
        return True
    try:
        importlib.import_module(f"{module}.{name}")
    except ModuleNotFoundError:
        return False
    return True


def _imports(module: str, nodes: list[ast.AST], missing: list[str]) -> dict[str, str]:
    """The project imports among ``nodes``: each name they bind to a project module (a
    local name -> the module); a name that does not exist goes to ``missing``."""
    modules: dict[str, str] = {}
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.level == 0 and _ours(node.module):
            assert node.module is not None
            for alias in node.names:
                if alias.name == "*":
                    continue
                if not _resolves(node.module, alias.name):
                    missing.append(f"{module}: from {node.module} import {alias.name}")
                    continue
                imported = getattr(importlib.import_module(node.module), alias.name)
                if isinstance(imported, ModuleType):
                    modules[alias.asname or alias.name] = imported.__name__
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if _ours(alias.name):
                    importlib.import_module(alias.name)
                    if alias.asname:
                        modules[alias.asname] = alias.name
    return modules


def _unresolved_in(module: str) -> list[str]:
    """Project names ``module`` imports (at the top or inside a function) or reads off
    a project module it imported (``scenarios.wait_terminal``) that do not exist. A name
    a function assigns is that function's own, whatever the module imported as it."""
    path = ROOT / (module.replace(".", "/") + ".py")
    if not path.exists():
        path = ROOT / module.replace(".", "/") / "__init__.py"
    tree = ast.parse(path.read_text())
    missing: list[str] = []
    top = _imports(module, list(tree.body), missing)
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    scopes: list[tuple[list[ast.AST], dict[str, str]]] = [
        ([n for n in tree.body if not isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)], top)
    ]
    for function in functions:
        inner = list(ast.walk(function))
        own = {n.id for n in inner if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        own |= {a.arg for a in ast.walk(function.args) if isinstance(a, ast.arg)}
        visible = {k: v for k, v in top.items() if k not in own}
        visible |= _imports(module, inner, missing)
        scopes.append(([function], visible))
    for nodes, modules in scopes:
        for node in (n for root in nodes for n in ast.walk(root)):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in modules
                and not hasattr(importlib.import_module(modules[node.value.id]), node.attr)
            ):
                name = f"{node.value.id}.{node.attr}"
                missing.append(f"{module}: {name} ({modules[node.value.id]})")
    return sorted(set(missing))


def unresolved_names() -> dict[str, list[str]]:
    """Run under the bench's settings after ``django.setup()``: per bench module, the
    names that do not resolve, or the third-party package it lacks (``skipped``)."""
    report: dict[str, list[str]] = {"missing": [], "skipped": []}
    for module in bench_modules():
        try:  # a module it imports inside a function may lack the package too
            importlib.import_module(module)
            report["missing"] += _unresolved_in(module)
        except ModuleNotFoundError as error:
            if _ours(error.name):
                raise
            report["skipped"].append(f"{module} (needs {error.name})")
    return report


def bench_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    return {**env, "DJANGO_SETTINGS_MODULE": "bench.settings", "PYTHONPATH": str(ROOT)}


def run_python(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=bench_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_every_bench_module_imports_and_every_project_name_it_uses_exists():
    result = run_python(
        "-c",
        "import django, json; django.setup(); "
        "from tests.bench.test_entry_points import unresolved_names; "
        "print(json.dumps(unresolved_names()))",
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.splitlines()[-1])
    assert report["missing"] == []
    # Only the peers may lack a package, and only their own.
    assert all(entry.startswith("bench.peers.") for entry in report["skipped"]), report


def test_the_resolver_finds_a_helper_read_off_a_module_it_no_longer_has(tmp_path, monkeypatch):
    """The control: a module calling ``scenarios.wait_terminal`` as engine_probe once
    did is reported."""
    package = tmp_path / "bench_control"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "helpers.py").write_text("def present():\n    pass\n")
    (package / "probe.py").write_text(
        "def main():\n"
        "    from bench_control import helpers\n"
        "    helpers.present()\n"
        "    helpers.moved_away()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    this = sys.modules[__name__]
    monkeypatch.setattr(this, "ROOT", tmp_path)
    monkeypatch.setattr(this, "PROJECT", {*PROJECT, "bench_control"})
    assert _unresolved_in("bench_control.probe") == [
        "bench_control.probe: helpers.moved_away (bench_control.helpers)"
    ]


def test_the_entry_points_are_the_ones_this_test_knows():
    assert {"bench.run", "bench.engine_probe", "bench.push_fakes"} <= set(entry_points())


@pytest.mark.parametrize("module", [m for m in entry_points() if m not in NO_OPTIONS])
def test_each_entry_point_parses_its_arguments(module):
    result = run_python("-m", module, "--help")
    if result.returncode != 0 and "ModuleNotFoundError" in result.stderr and ".peers." in module:
        pytest.skip(f"{module}: {result.stderr.strip().splitlines()[-1]}")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage:"), result.stdout


def test_bench_run_rejects_an_unknown_scenario_before_touching_anything():
    result = run_python("-m", "bench.run", "--quick", "--only", "no-such-scenario")
    assert result.returncode != 0
    assert "no-such-scenario" in result.stderr


def test_push_fakes_starts_its_fake_providers_and_reports_what_they_saw(tmp_path):
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.push_fakes", str(tmp_path)],
        cwd=ROOT,
        env=bench_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None and process.stdin is not None
        ready = json.loads(process.stdout.readline())
        assert "NOTIFYFLOW_EMAIL_BACKENDS" in ready["settings"] and ready["subscription"]
        assert ready["settings"]["NOTIFYFLOW_SLACK_API_URL"].startswith("https://127.0.0.1:")
        # The chat fakes answer over TLS, trusting the CA it wrote.
        trust = ssl.create_default_context(cafile=ready["ca"])
        answer = httpx.post(
            ready["chat"]["msteams_webhook"],
            json={"type": "message"},
            verify=trust,
            trust_env=False,
        )
        assert answer.status_code == 202
        process.stdin.close()
        seen = json.loads(process.stdout.readline())
        assert seen["received"] == {
            "fcm": 0,
            "apns": 0,
            "webpush": 0,
            "smtp": 0,
            "slack": 0,
            "msteams": 1,
        }
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
