"""The maps in CONTRIBUTING.md and docs/architecture.md say where the code is, and the
code agrees with them, so they cannot drift:

- their layer lists are the layers of the import-linter contract in pyproject.toml, and
  the project's apps are those of ``INSTALLED_APPS`` (and of every other list of apps);
- every repository path and every project name they put in backticks exists;
- the modules docs/architecture.md lists under "Hand-written SQL" are exactly those that
  hold some (the rule: ``holds_sql``);
- no product file, doc, or test name, docstring or comment points at a specification
  kept outside the repository, and every ``docs/<file>.md#<anchor>`` they name is a
  heading of that doc.

Each failure names what drifted: fix the doc (or the code) it names.
"""

from __future__ import annotations

import ast
import importlib
import io
import re
import tokenize
import tomllib
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
IMPORT_LINTER = PYPROJECT["tool"]["importlinter"]
APPS: tuple[str, ...] = tuple(IMPORT_LINTER["root_packages"])
MAPS = ("CONTRIBUTING.md", "docs/architecture.md")
# Where the product's own files are, besides the apps.
PRODUCT_DIRS = (*APPS, "bench", "scripts", "templates")
TEXT_SUFFIXES = {".py", ".md", ".html", ".txt", ".toml", ".json", ".yml", ".yaml", ".sh", ".sql"}
FILE_SUFFIXES = (".py", ".md", ".html", ".txt", ".toml", ".yml", ".yaml", ".json", ".sh", ".sql")


def read(name: str) -> str:
    return (ROOT / name).read_text()


def section(text: str, heading: str) -> str:
    """The text under ``## heading`` up to the next heading of that level."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"no section {heading!r}"
    return match.group(1)


def outside_fences(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def files_under(*dirs: str) -> Iterator[Path]:
    for name in dirs:
        for path in sorted((ROOT / name).rglob("*")) if (ROOT / name).is_dir() else ():
            if path.is_file() and path.suffix in TEXT_SUFFIXES and "__pycache__" not in path.parts:
                yield path


# --- (a) the layers -----------------------------------------------------------------------


def contract_layers() -> list[list[str]]:
    """The layers contract's layers, top first, each a list of its side-by-side apps."""
    [contract] = [c for c in IMPORT_LINTER["contracts"] if c["type"] == "layers"]
    return [[app.strip() for app in layer.split("|")] for layer in contract["layers"]]


def contributing_layers() -> list[list[str]]:
    """CONTRIBUTING's chain ``a`` ← ``b`` ← ... (bottom first), top first."""
    text = section(read("CONTRIBUTING.md"), "The layers")
    chains = [line for line in text.splitlines() if "←" in line]
    assert len(chains) == 1, f"CONTRIBUTING.md, The layers: one chain of ← expected: {chains}"
    layers = [[app.strip(" `") for app in part.split("|")] for part in chains[0].split("←")]
    return layers[::-1]


def architecture_layers() -> list[list[str]]:
    """docs/architecture.md's block: a line per layer, top first, the layer before its
    description (two spaces or more apart)."""
    block = re.search(r"```\n(.*?)```", section(read("docs/architecture.md"), "The layers"), re.S)
    assert block, "docs/architecture.md, The layers: no block of layers"
    lines = [line.strip() for line in block.group(1).splitlines() if line.strip()]
    return [[app.strip() for app in re.split(r"\s{2,}", line)[0].split("|")] for line in lines]


def installed_project_apps() -> set[str]:
    """The apps of INSTALLED_APPS that are packages of this repository."""
    tops = {entry.split(".")[0] for entry in settings.INSTALLED_APPS}
    return {top for top in tops if (ROOT / top / "__init__.py").exists() and top != "tests"}


def test_the_layer_lists_are_the_import_linter_layers_and_the_installed_apps():
    layers = contract_layers()
    assert contributing_layers() == layers, "CONTRIBUTING.md, The layers != pyproject.toml"
    assert architecture_layers() == layers, "docs/architecture.md, The layers != pyproject.toml"
    in_layers = sorted(app for layer in layers for app in layer)
    assert in_layers == sorted(APPS), "import-linter root_packages != its layers"
    assert sorted(installed_project_apps()) == in_layers, "INSTALLED_APPS != the layers"
    [acyclic] = [c for c in IMPORT_LINTER["contracts"] if c["type"] == "acyclic_siblings"]
    assert sorted(acyclic["ancestors"]) == in_layers, "the acyclic contract misses an app"
    assert sorted(PYPROJECT["tool"]["mypy"]["files"]) == in_layers, "mypy's files != the layers"


# --- (b) paths and names in backticks -------------------------------------------------------

# A path: segments of word characters, dots and dashes, with <placeholders> or * (patterns).
PATH = re.compile(r"[\w.<>*-]+(/[\w.<>*-]+)*/?")
DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")


def backticked_lines(name: str) -> Iterator[tuple[int, list[str]]]:
    """Each line of a map (outside code blocks) with the spans it puts in backticks."""
    for number, line in enumerate(outside_fences(read(name)).splitlines(), 1):
        spans = re.findall(r"`([^`\n]+)`", line)
        if spans:
            yield number, spans


def is_path(span: str) -> bool:
    return bool(PATH.fullmatch(span)) and ("/" in span or span.endswith(FILE_SUFFIXES))


def exists(relative: str, base: Path = ROOT) -> bool:
    """A path, or a pattern (<placeholder> or *), that names at least one file or
    directory."""
    pattern = re.sub(r"<[^>]*>", "*", relative.rstrip("/"))
    if "*" in pattern:
        return any(base.glob(pattern))
    return (base / pattern).exists()


def path_problem(span: str, context: list[Path]) -> str | None:
    """Why a path span names nothing, or None. A path is from the root; one under var/
    (what a run writes, not in the repository) is skipped, and so is a directory whose
    first segment is no top-level entry (a URL's path, ``webhooks/anymail/``). A bare
    name (``specs.py``, ``instances/``) is at the root or in a directory the same line
    names (``workflows/definition/``, a file's directory, an app); with none named, in
    any app; a bare pattern, anywhere in the apps or the tests."""
    if span.startswith("var/"):
        return None
    if "/" in span.rstrip("/"):
        if span.endswith("/") and not (ROOT / span.split("/")[0]).exists():
            return None
        return None if exists(span) else "no such path"
    if any(exists(span, base) for base in context):
        return None
    if "<" in span:  # a bare pattern (``test_<module>_<concept>.py``): anywhere will do
        pattern = re.sub(r"<[^>]*>", "*", span.rstrip("/"))
        if any(any((ROOT / top).rglob(pattern)) for top in (*APPS, "tests")):
            return None
    if len(context) == 1 and any(any((ROOT / app).rglob(span.rstrip("/"))) for app in APPS):
        return None
    return "no such name at the root or in the directories the line names"


def line_context(spans: list[str]) -> list[Path]:
    """The root and the directories a line names: its directories, its files'
    directories, its apps."""
    context = [ROOT]
    for span in spans:
        if span in APPS:
            context.append(ROOT / span)
        elif is_path(span) and "/" in span and exists(span):
            target = ROOT / span
            context.append(target if target.is_dir() else target.parent)
    return context


def task_names() -> set[str]:
    from notifyflow.celery import app

    app.loader.import_default_modules()
    return set(app.tasks)


def resolves(name: str) -> bool:
    """``app.module.attribute...``: the longest importable module, then attributes."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


def test_every_path_in_the_maps_exists():
    missing = []
    for name in MAPS:
        for number, spans in backticked_lines(name):
            context = line_context(spans)
            for span in spans:
                if is_path(span) and (problem := path_problem(span, context)):
                    missing.append(f"{name}:{number}: `{span}`: {problem}")
    assert not missing, "\n".join(missing)


def test_every_project_name_in_the_maps_exists():
    """``notifyflow.celery.send_task_on_commit``, ``api.views.triggers.X``, or a Celery
    task's name (``notifyflow.execute_node``): a call's arguments are left out."""
    tasks = task_names()
    missing = []
    for name in MAPS:
        for number, spans in backticked_lines(name):
            for span in spans:
                dotted = span.split("(")[0]
                if is_path(span) or not DOTTED.fullmatch(dotted):
                    continue
                if dotted.split(".")[0] in APPS and dotted not in tasks and not resolves(dotted):
                    missing.append(f"{name}:{number}: `{span}`")
    assert not missing, "names that resolve to nothing:\n" + "\n".join(missing)


# --- (c) hand-written SQL -------------------------------------------------------------------

# A string that starts an SQL statement (upper-case keywords, as the project writes them).
SQL_START = re.compile(
    r"\s*\(?\s*(SELECT|INSERT\s+INTO|UPDATE|DELETE\s+FROM|WITH|SET|CREATE|DROP|ALTER|LOCK"
    r"|TRUNCATE|VACUUM|ANALYZE|EXPLAIN)\s"
)
SQL_CALLS = {"RawSQL", "RunSQL", "raw", "extra"}


def holds_sql(path: Path) -> bool:
    """The rule: a ``.sql`` file, or a module with a string literal (or an f-string's
    first part) that starts an SQL statement - docstrings and bare string statements
    aside - or a call of ``RawSQL``, ``RunSQL``, ``.raw()`` or ``.extra()``."""
    if path.suffix == ".sql":
        return True
    tree = ast.parse(path.read_text())
    bare = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    for node in ast.walk(tree):
        if id(node) in bare:
            continue
        if isinstance(node, ast.JoinedStr) and node.values:
            node = node.values[0]
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if SQL_START.match(node.value):
                return True
        elif isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in SQL_CALLS:
                return True
    return False


def modules_with_sql() -> set[str]:
    """Every app's modules and migrations (bench/ and tests/ measure and test the
    product: they are not listed)."""
    return {
        path.relative_to(ROOT).as_posix()
        for path in files_under(*APPS)
        if path.suffix in (".py", ".sql") and holds_sql(path)
    }


def documented_sql() -> set[str]:
    """The modules in the first column of docs/architecture.md's "Hand-written SQL"."""
    rows = section(read("docs/architecture.md"), "Hand-written SQL").splitlines()
    cells = [row.split("|")[1] for row in rows if row.startswith("| `")]
    return {span for cell in cells for span in re.findall(r"`([^`]+\.(?:py|sql))`", cell)}


def test_the_hand_written_sql_list_is_the_modules_that_hold_some():
    actual, documented = modules_with_sql(), documented_sql()
    assert {"triggers/state/postgres.py", "notifyflow/db.py"} <= actual, "the rule found no SQL"
    assert not actual - documented, (
        f'SQL not in docs/architecture.md, "Hand-written SQL": {sorted(actual - documented)}'
    )
    assert not documented - actual, (
        f'in docs/architecture.md, "Hand-written SQL" without SQL: {sorted(documented - actual)}'
    )


# --- (d) references outside the repository, anchors -----------------------------------------

# A specification document kept outside the repository: the word in capitals, the section
# and pilcrow signs (an RFC's section is fine), its directory, its seed files.
OUTSIDE = re.compile(r"\bSPEC\b|\u00a7|\u00b6|\.\./shared|\bseeds?\s+0\d\d\b")
RFC_SECTION = re.compile(r"\bRFC \d+ \u00a7[\d.]+")


# The same in a name, where words are joined by underscores: ``..._the_spec...``, a
# section's number after the word, a seed file's.
NAME_OUTSIDE = re.compile(r"(?i)(^|_)(the_spec|spec_?\d+|seeds?_?0\d\d)(_|$)")


def outside_references(text: str) -> list[str]:
    hits = [m.group(0) for m in OUTSIDE.finditer(RFC_SECTION.sub("", text))]
    if text.isidentifier():
        hits += [m.group(2) for m in NAME_OUTSIDE.finditer(text)]
    return hits


def said_in_test_module(path: Path) -> Iterator[tuple[int, str]]:
    """What a test module says to a reader: its comments, docstrings and the names of its
    functions and classes (its assertions may spell what they refuse)."""
    source = path.read_text()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            docstring = ast.get_docstring(node, clean=False)
            if docstring:
                yield getattr(node, "lineno", 1), docstring
            if not isinstance(node, ast.Module):
                yield node.lineno, node.name


def test_nothing_points_at_a_specification_outside_the_repository():
    found = []
    docs = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *files_under("docs")]
    for path in [*files_under(*PRODUCT_DIRS), *docs]:
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if hits := outside_references(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {hits}")
    for path in files_under("tests"):
        lines = enumerate(path.read_text().splitlines(), 1)
        said = said_in_test_module(path) if path.suffix == ".py" else lines
        for number, words in said:
            if hits := outside_references(words):
                found.append(f"{path.relative_to(ROOT)}:{number}: {hits}")
    assert not found, "say what is meant, or name the doc here that says it:\n" + "\n".join(found)


def test_every_doc_anchor_named_in_the_product_and_the_docs_is_a_heading():
    headings = {}
    for doc in (ROOT / "docs").glob("*.md"):
        text = outside_fences(doc.read_text())
        headings[f"docs/{doc.name}"] = {slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}
    broken = []
    docs = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *files_under("docs")]
    for path in [*files_under(*PRODUCT_DIRS, "tests"), *docs]:
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            for doc, anchor in re.findall(r"(docs/[\w-]+\.md)#([\w-]+)", line):
                if anchor not in headings.get(doc, set()):
                    broken.append(f"{path.relative_to(ROOT)}:{number}: {doc}#{anchor}")
    assert not broken, "no such heading:\n" + "\n".join(broken)
