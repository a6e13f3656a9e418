"""Workflows as files: a directory holds one folder per workflow, ``<key>/workflow.json``
= ``{"$schema", key, name, is_active?, critical?, categories?, priority?, concurrency?,
definition}``. Any string in a node's config may be written ``"<field>@": "<file>"``, a
path relative to the workflow's folder whose text is the value (a single trailing newline
dropped): long templates live beside the JSON as ``.liquid`` / ``.html`` files.

Reading (``read_directory``, ``spec_from_document``) turns files into ``WorkflowSpec``s,
definitions validated and normalised, or lists every problem, each naming its file, node
and field. Writing (``workflow_files``) is ``export``'s: the same spec always gives the
same bytes, and reading them back gives the same spec. No database here: ``workflows.sync``
compares specs with the stored workflows and writes them.

A setting left out of a file is its default (active, not critical, no categories,
normal priority, no concurrency limit): the files are the whole truth, so deleting a line
resets the setting on the next sync.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from translations.locales import is_locale

from .concurrency import MAX_LIMIT, NO_LIMIT, Concurrency, key_template_problem
from .definition import MAX_NAME_LENGTH, DefinitionError, DefinitionProblem, validate_definition
from .models import Priority
from .translation_files import read_translations, translation_files, translations_problem

WORKFLOW_FILE = "workflow.json"
# Written once at the top of the directory; every workflow.json points at it, so an editor
# completes and checks the files offline (workflows.file_schema).
SCHEMA_FILE = "workflow.schema.json"
SCHEMA_REF = f"../{SCHEMA_FILE}"
REFERENCE = "@"
# export moves a config string to its own file when it has a line break or is longer.
INLINE_MAX_CHARS = 100
KEY_RE = re.compile(r"^[-a-zA-Z0-9_]{1,100}$")
MAX_CATEGORIES = 20  # as the API's workflow body
DOCUMENT_FIELDS = (
    "$schema",
    "key",
    "name",
    "is_active",
    "critical",
    "categories",
    "priority",
    "concurrency",
    "default_locale",
    "translations",
    "definition",
)
# The order export writes a definition's keys in, whatever order the database kept.
DEFINITION_ORDER = ("entry_node_id", "nodes", "edges", "interests", "cancel_on")
NODE_ORDER = ("id", "type", "config")
EDGE_ORDER = ("from", "to", "condition")


@dataclass(frozen=True)
class FileProblem:
    """One problem: ``file`` (relative to the directory, or the place in a request body),
    ``field`` (``name``, ``definition.nodes[0].config.body``), the node when there is one."""

    file: str
    field: str
    message: str
    node: str | None = None
    code: str = "invalid"

    def __str__(self) -> str:
        node = f"node {self.node!r}, " if self.node else ""
        field = f"{self.field}: " if self.field else ""
        return f"{self.file}: {node}{field}{self.message}"


@dataclass(frozen=True)
class WorkflowSpec:
    """A workflow as the files describe it; ``definition`` is validated and normalised."""

    key: str
    name: str
    definition: dict[str, Any]
    is_active: bool = True
    critical: bool = False
    categories: tuple[str, ...] = ()
    priority: str = Priority.NORMAL.value
    concurrency: Concurrency = NO_LIMIT
    default_locale: str = ""
    # Its namespace's catalogues by locale (``workflows.translation_files``); None: not
    # given, the stored ones are left alone.
    translations: dict[str, Any] | None = field(default=None, hash=False)

    def document(self) -> dict[str, Any]:
        """Every setting and the definition: what a sync compares and diffs."""
        limit = self.concurrency.limit
        return {
            "name": self.name,
            "is_active": self.is_active,
            "critical": self.critical,
            "categories": list(self.categories),
            "priority": self.priority,
            "concurrency": None if limit is None else {"limit": limit, "key": self.concurrency.key},
            "default_locale": self.default_locale,
            **({} if self.translations is None else {"translations": self.translations}),
            "definition": self.definition,
        }


# --- Reading ---------------------------------------------------------------------------


def read_directory(directory: Path) -> tuple[list[WorkflowSpec], list[FileProblem]]:
    """Every workflow folder of ``directory`` (hidden ones skipped), by key; the specs are
    only worth using when there is no problem."""
    if not directory.is_dir():
        return [], [FileProblem(str(directory), "", "not a directory", code="not_found")]
    specs: list[WorkflowSpec] = []
    problems: list[FileProblem] = []
    for folder in sorted(p for p in directory.iterdir() if p.is_dir()):
        if folder.name.startswith("."):
            continue
        spec, found = read_workflow(folder)
        problems.extend(found)
        if spec is not None:
            specs.append(spec)
    return specs, problems


def read_workflow(folder: Path) -> tuple[WorkflowSpec | None, list[FileProblem]]:
    """One workflow folder: its ``workflow.json`` and the files it references."""
    file = f"{folder.name}/{WORKFLOW_FILE}"
    try:
        document = json.loads((folder / WORKFLOW_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, [
            FileProblem(file, "", "missing: each folder holds one workflow", code="missing_file")
        ]
    except UnicodeDecodeError:
        return None, [FileProblem(file, "", "not UTF-8 text", code="invalid_json")]
    except json.JSONDecodeError as exc:
        message = f"not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        return None, [FileProblem(file, "", message, code="invalid_json")]
    translations, unreadable = read_translations(folder)
    if unreadable:
        return None, [FileProblem(f, "", m, code="invalid_json") for f, m in unreadable]
    if translations is not None and isinstance(document, dict):
        document = {**document, "translations": translations}
    return spec_from_document(document, file=file, folder=folder)


def spec_from_document(
    document: Any, *, file: str, folder: Path | None = None
) -> tuple[WorkflowSpec | None, list[FileProblem]]:
    """A workflow document (a file's, or one of ``POST /workflows/sync/``'s) as a spec, or
    every problem with it. ``folder`` None: file references are refused (a request body
    carries the text itself); else its ``key`` must be the folder's name."""
    if not isinstance(document, dict):
        return None, [FileProblem(file, "", "must be a JSON object", code="not_an_object")]
    problems = _settings_problems(document, file=file, folder=folder)
    if "definition" not in document:
        problems.append(FileProblem(file, "definition", "is required", code="required"))
        return None, problems
    references = _References(file=file, folder=folder)
    definition = references.resolve_definition(document["definition"])
    problems.extend(references.problems)
    try:
        clean = validate_definition(definition)
    except DefinitionError as exc:
        problems.extend(
            references.problem(p) for p in exc.errors if p.field not in references.unresolved
        )
    if problems:
        return None, problems
    concurrency = document.get("concurrency")
    return WorkflowSpec(
        key=document["key"],
        name=document["name"],
        definition=clean,
        is_active=document.get("is_active", True),
        critical=document.get("critical", False),
        categories=tuple(document.get("categories", ())),
        priority=document.get("priority", Priority.NORMAL.value),
        concurrency=NO_LIMIT
        if concurrency is None
        else Concurrency(limit=concurrency["limit"], key=concurrency.get("key", "")),
        default_locale=document.get("default_locale", ""),
        translations=document.get("translations"),
    ), []


def _key_problem(value: Any) -> str | None:
    if not isinstance(value, str) or not KEY_RE.match(value):
        return "must be a slug: 1-100 letters, digits, '-' or '_'"
    return None


def _name_problem(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_NAME_LENGTH:
        return f"must be a non-empty string of at most {MAX_NAME_LENGTH} characters"
    return None


def _boolean_problem(value: Any) -> str | None:
    return None if isinstance(value, bool) else "must be true or false"


def _string_problem(value: Any) -> str | None:
    return None if isinstance(value, str) else "must be a string"


def _categories_problem(value: Any) -> str | None:
    if not isinstance(value, list) or len(value) > MAX_CATEGORIES:
        return f"must be a list of at most {MAX_CATEGORIES} category slugs"
    if any(_key_problem(slug) for slug in value):
        return "each category must be a slug: 1-100 letters, digits, '-' or '_'"
    if len(set(value)) != len(value):
        return "a category is listed twice"
    return None


def _locale_problem(value: Any) -> str | None:
    if value == "" or (isinstance(value, str) and is_locale(value)):
        return None
    return 'must be a locale (BCP 47: en, pt-BR) or ""'


def _priority_problem(value: Any) -> str | None:
    return None if value in Priority.values else f"must be one of {', '.join(Priority.values)}"


def _concurrency_problem(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) - {"limit", "key"}:
        return "must be null or {limit, key?}"
    limit, key = value.get("limit"), value.get("key", "")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        return f"limit must be an integer from 1 to {MAX_LIMIT}"
    if not isinstance(key, str):
        return "key must be a string"
    problem = key_template_problem(key)
    return None if problem is None else f"key: {problem}"


SETTING_CHECKS = {
    "$schema": _string_problem,
    "key": _key_problem,
    "name": _name_problem,
    "is_active": _boolean_problem,
    "critical": _boolean_problem,
    "categories": _categories_problem,
    "priority": _priority_problem,
    "concurrency": _concurrency_problem,
    "default_locale": _locale_problem,
    "translations": translations_problem,
}


def _settings_problems(
    document: dict[str, Any], *, file: str, folder: Path | None
) -> list[FileProblem]:
    problems = [
        FileProblem(file, str(name), "unknown field", code="unknown_field")
        for name in document
        if name not in DOCUMENT_FIELDS
    ]
    for name in ("key", "name"):
        if name not in document:
            problems.append(FileProblem(file, name, "is required", code="required"))
    for name, check in SETTING_CHECKS.items():
        message = check(document[name]) if name in document else None
        if message is not None:
            problems.append(FileProblem(file, name, message))
    key = document.get("key")
    if folder is not None and isinstance(key, str) and key != folder.name:
        message = f"must be the folder's name, {folder.name!r}"
        problems.append(FileProblem(file, "key", message, code="key_mismatch"))
    return problems


@dataclass
class _References:
    """Resolves ``"<field>@": "<file>"`` in node configs, remembering which field came
    from which file (a template problem then names that file) and which could not be
    read (their "is required" would only repeat the problem)."""

    file: str
    folder: Path | None
    problems: list[FileProblem] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)
    unresolved: set[str] = field(default_factory=set)

    def resolve_definition(self, definition: Any) -> Any:
        if not isinstance(definition, dict) or not isinstance(definition.get("nodes"), list):
            return definition
        nodes = [
            self._resolve_node(node, f"nodes[{index}]") if isinstance(node, dict) else node
            for index, node in enumerate(definition["nodes"])
        ]
        return {**definition, "nodes": nodes}

    def problem(self, problem: DefinitionProblem) -> FileProblem:
        """A definition's problem, in the file its field came from."""
        where = "definition" if problem.field == "definition" else f"definition.{problem.field}"
        return FileProblem(
            self.sources.get(problem.field, self.file),
            where,
            problem.message,
            node=problem.node,
            code=problem.code,
        )

    def _resolve_node(self, node: dict[str, Any], path: str) -> dict[str, Any]:
        if "config" not in node:
            return node
        node_id = node.get("id") if isinstance(node.get("id"), str) else None
        return {**node, "config": self._resolve(node["config"], f"{path}.config", node_id)}

    def _resolve(self, value: Any, path: str, node: str | None) -> Any:
        if isinstance(value, list):
            return [self._resolve(item, f"{path}[{i}]", node) for i, item in enumerate(value)]
        if not isinstance(value, dict):
            return value
        resolved: dict[str, Any] = {}
        for key, item in value.items():
            if not (isinstance(key, str) and key.endswith(REFERENCE) and len(key) > 1):
                resolved[key] = self._resolve(item, f"{path}.{key}", node)
                continue
            name = key[: -len(REFERENCE)]
            field_path = f"{path}.{name}"
            if name in value:
                self._add(field_path + REFERENCE, f"both {name!r} and {key!r}: write one", node)
                continue
            text = self._read(item, field_path, node)
            if text is None:
                self.unresolved.add(field_path)
            else:
                resolved[name] = text
        return resolved

    def _read(self, reference: Any, field_path: str, node: str | None) -> str | None:
        """The referenced file's text, or None (the problem recorded)."""
        where = field_path + REFERENCE
        if self.folder is None:
            self._add(where, "a file reference needs the files: send the text instead", node)
            return None
        relative = PurePosixPath(reference) if isinstance(reference, str) else None
        if relative is None or not reference or "\\" in reference:
            self._add(where, "must be a file name relative to the workflow's folder", node)
            return None
        path = self.folder / relative
        if (
            relative.is_absolute()
            or ".." in relative.parts
            or not path.resolve().is_relative_to(self.folder.resolve())
        ):
            message = f"{reference!r} is outside the workflow's folder"
            self._add(where, message, node, "path_outside_folder")
            return None
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            self._add(where, f"{reference!r} is not UTF-8 text", node)
            return None
        except OSError as exc:
            message = f"{reference!r}: {exc.strerror or 'cannot be read'}"
            self._add(where, message, node, "missing_file")
            return None
        self.sources[field_path] = f"{self.folder.name}/{reference}"
        return text[:-1] if text.endswith("\n") else text

    def _add(self, field_path: str, message: str, node: str | None, code: str = "invalid") -> None:
        self.problems.append(
            FileProblem(self.file, f"definition.{field_path}", message, node=node, code=code)
        )


# --- Writing ---------------------------------------------------------------------------


def workflow_files(spec: WorkflowSpec) -> dict[str, str]:
    """What ``export`` writes for ``spec``: the text of each file, by its path in the
    workflow's folder. A config string with a line break or over ``INLINE_MAX_CHARS``
    characters goes to ``<node>.<field>.liquid`` (``.html`` for an HTML field)."""
    files: dict[str, str] = {}
    definition = _ordered(spec.definition, DEFINITION_ORDER)
    nodes = []
    for node in definition["nodes"]:
        config: dict[str, Any] = {}
        for name, value in sorted(node.get("config", {}).items()):
            if isinstance(value, str) and ("\n" in value or len(value) > INLINE_MAX_CHARS):
                file = f"{node['id']}.{name}.{'html' if 'html' in name else 'liquid'}"
                files[file] = value + "\n"
                config[name + REFERENCE] = file
            else:
                config[name] = _sorted(value)
        nodes.append(_ordered({**node, "config": config}, NODE_ORDER))
    definition["nodes"] = nodes
    definition["edges"] = [_ordered(edge, EDGE_ORDER) for edge in definition.get("edges", [])]
    document: dict[str, Any] = {"$schema": SCHEMA_REF, "key": spec.key}
    defaults = WorkflowSpec(key=spec.key, name=spec.name, definition={}).document()
    for name, value in spec.document().items():
        if name == "translations":  # their own files
            continue
        if name == "name" or (name != "definition" and value != defaults[name]):
            document[name] = value
    document["definition"] = definition
    files[WORKFLOW_FILE] = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    files.update(translation_files(spec.translations))
    return files


def write_files(folder: Path, files: dict[str, str]) -> list[Path]:
    """Write each file whose text differs (an unchanged file is not touched: a second
    export changes no byte, not even a modification time); the paths written."""
    written = []
    for name, text in sorted(files.items()):
        path = folder / name
        data = text.encode("utf-8")
        if path.is_file() and path.read_bytes() == data:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        written.append(path)
    return written


def _ordered(value: dict[str, Any], order: tuple[str, ...]) -> dict[str, Any]:
    """``value``'s keys in ``order`` first, then any other sorted; nested values sorted."""
    first = {key: _sorted(value[key]) for key in order if key in value}
    return first | {key: _sorted(value[key]) for key in sorted(value) if key not in first}


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _sorted(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted(item) for item in value]
    return value
