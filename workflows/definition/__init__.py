"""Workflow definitions: the one validator used by the API, the admin and any import.

A definition is ``{"entry_node_id", "nodes": [{id, type, config}], "edges": [{from, to,
condition?}]}``. ``validate_definition`` returns a normalized copy or raises
``DefinitionError`` whose ``errors`` each name the node and the field.

By concept: ``node_types`` (the registry: each node type's one declaration),
``specs`` (field kinds, the shared fields, limits), ``problems`` (the error),
``validation`` (the structure, in order), ``fields`` (one check per field kind),
``graph`` (cycles, reachability, lookups), ``variables`` (what templates may read),
``webhooks`` (the webhook URL policy).
"""

from . import node_types
from .graph import node_by_id, outgoing_edges
from .node_types import Drawing, NodeType
from .problems import DefinitionError, DefinitionProblem
from .specs import (
    EXPIRES_AFTER_FIELD,
    MAX_INTERESTS,
    MAX_NAME_LENGTH,
    MAX_RECIPIENTS,
    MAX_RETRY_DELAY_S,
    NODE_ID_RE,
    RETRY_FIELD,
    RETRY_KEYS,
    SEND_WINDOW_FIELD,
    SEND_WINDOW_KEYS,
    TEMPLATE_KINDS,
    TIME_OF_DAY_RE,
    WEBHOOK_METHODS,
    WEEKDAYS,
    ExactlyOneOf,
    FieldSpec,
)
from .validation import validate_definition
from .variables import CANCEL_SCOPE, INTEREST_SCOPE, NODE_SCOPE
from .webhooks import WEBHOOK_DEFAULT_PORTS, webhook_host_allowed, webhook_url_port

__all__ = [
    "CANCEL_SCOPE",
    "EXPIRES_AFTER_FIELD",
    "INTEREST_SCOPE",
    "MAX_INTERESTS",
    "MAX_NAME_LENGTH",
    "MAX_RECIPIENTS",
    "MAX_RETRY_DELAY_S",
    "NODE_ID_RE",
    "NODE_SCOPE",
    "RETRY_FIELD",
    "RETRY_KEYS",
    "SEND_WINDOW_FIELD",
    "SEND_WINDOW_KEYS",
    "TEMPLATE_KINDS",
    "TIME_OF_DAY_RE",
    "WEBHOOK_DEFAULT_PORTS",
    "WEBHOOK_METHODS",
    "WEEKDAYS",
    "DefinitionError",
    "DefinitionProblem",
    "Drawing",
    "ExactlyOneOf",
    "FieldSpec",
    "NodeType",
    "node_by_id",
    "node_types",
    "outgoing_edges",
    "validate_definition",
    "webhook_host_allowed",
    "webhook_url_port",
]
