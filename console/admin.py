"""Django's admin autodiscovery imports this module: each import registers its admins,
every model exactly once."""

from . import api_keys, bindings, fanouts, history, instances, recipients, throttles, workflows

__all__ = [
    "api_keys",
    "bindings",
    "fanouts",
    "history",
    "instances",
    "recipients",
    "throttles",
    "workflows",
]
