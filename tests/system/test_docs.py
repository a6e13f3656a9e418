"""The docs cannot drift from the product: the README starts with the two commands and
stays short, every setting the product reads is documented in docs/settings.md, and
every link between the docs reaches a file and a heading that exist."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Every app: the packages the import-linter contracts cover.
APPS = tuple(
    tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"]
)
# How the settings read an environment variable: os.environ.get("X"), os.getenv("X"),
# os.environ["X"], and the typed helpers of notifyflow/env.py (env_int("X", ...)).
READERS = {"get", "getenv", "env_bool", "env_int", "env_float", "env_list", "env_providers"}


def markdown_files() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]


def environment_variables() -> set[str]:
    names: set[str] = set()
    for app in APPS:
        for path in (ROOT / app).glob("**/*.py") if (ROOT / app).is_dir() else ():
            if "migrations" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call) and node.args:
                    func = node.func
                    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                    key = node.args[0]
                    reads = name in READERS or name.startswith("_env")
                    if name == "get":  # os.environ.get, not any mapping's get
                        reads = ast.unparse(func).endswith("environ.get")
                elif isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ":
                    key, reads = node.slice, True
                else:
                    continue
                if reads and isinstance(key, ast.Constant) and isinstance(key.value, str):
                    if re.fullmatch(r"[A-Z][A-Z0-9_]+", key.value):
                        names.add(key.value)
    return names


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def test_the_readme_starts_with_make_run_and_make_test_and_stays_short():
    readme = (ROOT / "README.md").read_text()
    first_block = re.search(r"```sh\n(.*?)```", readme, re.S)
    assert first_block and readme.index("```sh") < readme.index("\n## "), "no command block first"
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines()]
    assert commands[:2] == ["make run", "make test"], commands
    # The operations manual, API reference and figures live in docs/, not here; the
    # walks that run as pasted (tests/system/test_readme_walks.py) take the rest.
    assert len(readme) < 20_000, f"README.md is {len(readme)} characters: move details to docs/"


def test_every_environment_variable_the_product_reads_is_in_the_settings_reference():
    documented = (ROOT / "docs" / "settings.md").read_text()
    names = environment_variables()
    assert {"DATABASE_URL", "CELERY_BROKER_URL", "NOTIFYFLOW_LEASE_S"} <= names, names
    missing = sorted(name for name in names if f"`{name}`" not in documented)
    assert not missing, f"not in docs/settings.md: {missing}"


def test_every_link_between_the_docs_reaches_a_file_and_a_heading():
    broken = []
    for path in markdown_files():
        text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            file_part, _, anchor = target.partition("#")
            linked = (path.parent / file_part).resolve() if file_part else path
            if not linked.exists():
                broken.append(f"{path.name}: {target} (no such file)")
            elif anchor and linked.suffix == ".md":
                linked_text = re.sub(r"```.*?```", "", linked.read_text(), flags=re.S)
                headings = re.findall(r"^#+ (.+)$", linked_text, re.M)
                if anchor not in {slug(h) for h in headings}:
                    broken.append(f"{path.name}: {target} (no such heading)")
    assert not broken, broken
