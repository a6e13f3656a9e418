"""The built-in node types, one module each: each declares its ``NodeType`` (config
fields, run, preview, channel, drawing) and registers it in
``workflows.definition.node_types`` when imported. Importing this package
(``ExecutionsConfig.ready``) imports them in the order of BUILT_IN - the order the
validator lists them in and the schema describes them; ``NOTIFYFLOW_NODE_MODULES`` names
further modules imported after them (``load_node_modules``)."""

from __future__ import annotations

from collections.abc import Iterable
from importlib import import_module

from ..step import NodeResult, StepContext

# One line per built-in node type: its module, here.
BUILT_IN = (
    "email",
    "sms",
    "delay",
    "wait",
    "emit",
    "webhook",
    "throttle",
    "batch",
    "in_app",
    "push",
    "chat",
)

for _module in BUILT_IN:
    import_module(f"{__name__}.{_module}")


def load_node_modules(modules: Iterable[str]) -> None:
    """Import each dotted module path: each registers its node type(s) as it is imported
    (a deployment's own, or a test's: ``NOTIFYFLOW_NODE_MODULES``)."""
    for path in modules:
        import_module(path)


__all__ = ["BUILT_IN", "NodeResult", "StepContext", "load_node_modules"]
