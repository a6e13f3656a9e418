"""Django's admin autodiscovery imports this module: each import registers its admins,
every model exactly once."""

from . import (
    api_keys,
    batches,  # gates (SPEC §13)
    bindings,
    fanouts,
    history,
    instances,
    recipients,
    throttles,  # gates (SPEC §13)
    workflows,
)

__all__ = [
    "api_keys",
    "batches",
    "bindings",
    "fanouts",
    "history",
    "instances",
    "recipients",
    "throttles",
    "workflows",
]
