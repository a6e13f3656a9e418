"""Workflow definitions: the one validator used by the API, the admin and any import.

A definition is ``{"entry_node_id", "nodes": [{id, type, config}], "edges": [{from, to,
condition?}]}``. ``validate_definition`` returns a normalized copy or raises
``DefinitionError`` whose ``errors`` each name the node and the field.

By concept: ``specs`` (node types, field kinds, limits), ``problems`` (the error),
``validation`` (the structure, in order), ``fields`` (one check per field kind),
``graph`` (cycles, reachability, lookups), ``variables`` (what templates may read),
``webhooks`` (the webhook URL policy).
"""

from .graph import node_by_id, outgoing_edges
from .problems import DefinitionError, DefinitionProblem
from .specs import (
    EXACTLY_ONE_OF,
    MAX_INTERESTS,
    MAX_NAME_LENGTH,
    MAX_RECIPIENTS,
    MAX_RETRY_DELAY_S,
    NODE_CONFIG_SPECS,
    NODE_DESCRIPTIONS,
    NODE_ID_RE,
    NODE_TYPES,
    RETRY_KEYS,
    SEND_WINDOW_KEYS,
    TEMPLATE_KINDS,
    TIME_OF_DAY_RE,
    WEBHOOK_METHODS,
    WEEKDAYS,
    FieldSpec,
)
from .validation import validate_definition
from .variables import CANCEL_SCOPE, INTEREST_SCOPE, NODE_SCOPE, TYPES_WITH_VARS
from .webhooks import WEBHOOK_DEFAULT_PORTS, webhook_host_allowed, webhook_url_port

__all__ = [
    "CANCEL_SCOPE",
    "EXACTLY_ONE_OF",
    "INTEREST_SCOPE",
    "MAX_INTERESTS",
    "MAX_NAME_LENGTH",
    "MAX_RECIPIENTS",
    "MAX_RETRY_DELAY_S",
    "NODE_CONFIG_SPECS",
    "NODE_DESCRIPTIONS",
    "NODE_ID_RE",
    "NODE_SCOPE",
    "NODE_TYPES",
    "RETRY_KEYS",
    "SEND_WINDOW_KEYS",
    "TEMPLATE_KINDS",
    "TIME_OF_DAY_RE",
    "TYPES_WITH_VARS",
    "WEBHOOK_DEFAULT_PORTS",
    "WEBHOOK_METHODS",
    "WEEKDAYS",
    "DefinitionError",
    "DefinitionProblem",
    "FieldSpec",
    "node_by_id",
    "outgoing_edges",
    "validate_definition",
    "webhook_host_allowed",
    "webhook_url_port",
]
