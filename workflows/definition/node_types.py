"""The node-type registry: every node type declares itself once, in one ``NodeType``, and
everything else - the validator, the JSON Schema, the engine, the recorder, the console's
drawing, the preview - reads it from here and names no type.

A declaration holds the type's config fields (``FieldSpec``: the validator checks each by
its kind, ``definition/fields.py``, and the JSON Schema is generated from the same
specs), how it runs and previews (callables taking the step ``executions.step.StepContext``
and returning ``executions.step.NodeResult``: this layer only holds them), the preference
channel it sends on (or None), and how it is drawn.

The built-in types register when the ``executions`` app is ready (``executions.nodes``);
``NOTIFYFLOW_NODE_MODULES`` lists further modules imported then, each registering its
own. The registry is read at use, never copied at import: a type registered later (a
test's) is validated, described by the schema and drawn from then on.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .specs import ExactlyOneOf, FieldSpec

NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
DEFAULT_COLOUR = "#5f6b7a"


def no_summary(config: Mapping[str, Any]) -> str:
    return ""


@dataclass(frozen=True)
class Drawing:
    """How a node of the type is drawn: its colour and label in the console's SVG, a
    one-line summary of its config (``summary(config)``: untrusted, any JSON in it), and
    its shape in the Mermaid and Graphviz text of the API."""

    colour: str = DEFAULT_COLOUR
    label: str = ""  # default: the type's name in capitals
    summary: Callable[[Mapping[str, Any]], str] = no_summary
    mermaid: tuple[str, str] = ("[", "]")
    dot_shape: str = "box"
    dot_style: str = ""


@dataclass(eq=False)
class NodeType:
    """Everything about one node type (``executions/nodes/<type>.py`` declares it)."""

    name: str
    # What the type does, for the JSON Schema and the docs.
    description: str
    fields: Mapping[str, FieldSpec]
    # The step: StepContext -> NodeResult (executions.step).
    run: Callable[[Any], Any]
    # A preview's run (the same arguments; sends and writes nothing). None: ``run``,
    # which sees ``step.preview``.
    preview: Callable[[Any], Any] | None = None
    exactly_one_of: ExactlyOneOf | None = None
    # Its output is kept as ``vars.<name>_<node id>`` (templates may read it).
    writes_vars: bool = True
    # The recipient preference channel it sends on (``recipients.preferences``), if any.
    channel: str | None = None
    drawing: Drawing = field(default_factory=Drawing)

    @property
    def label(self) -> str:
        return self.drawing.label or self.name.upper()

    def summary(self, config: Mapping[str, Any]) -> str:
        return self.drawing.summary(config)

    def vars_key(self, node_id: str) -> str:
        return f"{self.name}_{node_id}"


_registry: dict[str, NodeType] = {}


def register(node_type: NodeType) -> NodeType:
    """Add ``node_type`` (again: a no-op). ValueError for a bad name, a field kind the
    validator has no check for, or another type of the same name."""
    from .fields import known_kind  # the checks import the specs, which import nothing here

    if not NAME_RE.match(node_type.name):
        raise ValueError(f"node type name {node_type.name!r}: 1-32 of a-z, 0-9, _")
    unknown = sorted(k for k, spec in node_type.fields.items() if not known_kind(spec.kind))
    if unknown:
        raise ValueError(f"node type {node_type.name!r}: no check for the kind of {unknown}")
    known = _registry.get(node_type.name)
    if known is not None and known is not node_type:
        raise ValueError(f"node type {node_type.name!r} is already registered")
    _registry[node_type.name] = node_type
    return node_type


def unregister(name: str) -> None:
    _registry.pop(name, None)


def get(name: str) -> NodeType:
    """The type called ``name``; KeyError if none is registered."""
    return _registry[name]


def find(name: Any) -> NodeType | None:
    return _registry.get(name) if isinstance(name, str) else None


def all() -> tuple[NodeType, ...]:
    """Every registered type, in registration order."""
    return tuple(_registry.values())


def names() -> tuple[str, ...]:
    return tuple(_registry)
