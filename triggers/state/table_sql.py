"""The instance table as SQL, built from the models' ``_meta`` (no column written by
hand): the names the PostgreSQL statements of transitions (``postgres``) and of creation
(``postgres_creation``) share, and the audit and interest INSERTs both write."""

from __future__ import annotations

from typing import Any

from ..models import Interest, TriggerInstance, TriggerStatusChange

INSTANCE = TriggerInstance._meta
AUDIT = TriggerStatusChange._meta
_INTEREST = Interest._meta


def q(meta: Any, name: str) -> str:
    """A model field's quoted column."""
    return f'"{meta.get_field(name).column}"'


TABLE = f'"{INSTANCE.db_table}"'
PK = f'"{INSTANCE.pk.column}"'
CONCRETE = list(INSTANCE.concrete_fields)
# By name, not ``*``: a prepared statement's result type must not change under it when a
# migration adds a column.
COLUMNS = [f'"{f.column}"' for f in CONCRETE]
FIELDS = {f.name: f for f in CONCRETE} | {f.attname: f for f in CONCRETE}
FIELDS["pk"] = INSTANCE.pk
ATTNAMES = [f.attname for f in CONCRETE]

_AUDIT_COLUMNS = ", ".join(
    q(AUDIT, name)
    for name in ("instance", "from_status", "to_status", "reason", "actor", "at", "details")
)


def audit_insert(source: str, at: str = "%s") -> str:
    """The audit row of every row of ``source``; parameters: from, to, reason, actor,
    (``at`` unless given as a column), details."""
    return (
        f'INSERT INTO "{AUDIT.db_table}" ({_AUDIT_COLUMNS})'
        f" SELECT {PK}, %s, %s, %s, %s, {at}, %s FROM {source}"
    )


INTEREST_INSERT = (
    f'INSERT INTO "{_INTEREST.db_table}" ({q(_INTEREST, "instance")}, {q(_INTEREST, "subject")})'
)
