"""Django's admin autodiscovery imports this module: each import registers its admins,
every model exactly once."""

from . import (
    api_keys,
    batches,  # gates (SPEC §13)
    bindings,
    fanouts,
    feed,  # the in-app feed (SPEC §14)
    history,
    instances,
    recipients,
    status_webhooks,  # status webhooks (SPEC §15)
    throttles,  # gates (SPEC §13)
    workflows,
)

__all__ = [
    "api_keys",
    "batches",
    "bindings",
    "fanouts",
    "feed",
    "history",
    "instances",
    "recipients",
    "status_webhooks",
    "throttles",
    "workflows",
]
