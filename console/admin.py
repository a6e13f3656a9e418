"""Django's admin autodiscovery imports this module: each import registers its admins,
every model exactly once."""

from . import (
    api_keys,
    batches,  # gates
    bindings,
    fanouts,
    feed,  # the in-app feed
    history,
    instances,
    recipients,
    status_webhooks,  # status webhooks to the customer
    throttles,  # gates
    translations,  # message catalogues
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
    "translations",
    "workflows",
]
