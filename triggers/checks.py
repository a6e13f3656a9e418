"""What the queue table needs from PostgreSQL's autovacuum, checked where an operator
looks: ``manage.py check --deploy`` (a Django system check) and ``/readyz`` (its
``autovacuum`` entry).

Every claim and every outcome rewrites an instance row, so the instance table churns
dead tuples all day; migration 0002_queue_table_autovacuum sets per-table autovacuum
settings that vacuum it on a fixed threshold. They do nothing when the server's
``autovacuum`` is off (a tuning or a bench machine left that way), and they are gone
when the table was made outside the migrations (a schema copied by another tool, a
table rebuilt by hand): the ready index then fills with dead entries and claims slow
down several times within minutes.

``autovacuum_state`` reads both in one query; ``autovacuum_findings`` says what is
wrong with a state, so each branch is tested without changing the server.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.core.checks import CheckMessage, Warning, register
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

from notifyflow import caching, db

from .models import TriggerInstance

logger = logging.getLogger("notifyflow.triggers")

# The options migration 0002_queue_table_autovacuum sets on the instance table (their
# values may be tuned; a missing one means the table vacuums on the defaults).
QUEUE_TABLE_OPTIONS = (
    "autovacuum_vacuum_scale_factor",
    "autovacuum_vacuum_threshold",
    "autovacuum_vacuum_cost_delay",
    "autovacuum_analyze_scale_factor",
    "autovacuum_vacuum_insert_scale_factor",
    "autovacuum_vacuum_insert_threshold",
)
_FALSE = frozenset({"off", "false", "no", "0", "f", "n"})

SERVER_OFF = "notifyflow.W020"
QUEUE_TABLE_UNTUNED = "notifyflow.W021"

# /readyz may be polled every second by every load balancer: read at most once a
# minute per process.
_cache: caching.ProcessCache[tuple[str, ...]] = caching.ProcessCache(
    name="autovacuum findings", maxsize=1, ttl_s=60
)


@dataclass(frozen=True)
class AutovacuumState:
    """The server's ``autovacuum`` setting and the instance table's storage options
    (``pg_class.reloptions``, name -> value); ``table_options`` is None when the table
    does not exist yet (not migrated)."""

    server_on: bool
    table_options: dict[str, str] | None


@dataclass(frozen=True)
class Finding:
    id: str
    message: str
    hint: str


def autovacuum_state(using: str = DEFAULT_DB_ALIAS) -> AutovacuumState | None:
    """Both settings in one query; None on a database other than PostgreSQL. Raises
    ``DatabaseError`` when the database cannot be read."""
    connection = connections[using]
    if not db.is_postgres(connection):
        return None
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('autovacuum') = 'on', to_regclass(%s) IS NOT NULL,"
            " (SELECT reloptions FROM pg_class WHERE oid = to_regclass(%s))",
            [connection.ops.quote_name(TriggerInstance._meta.db_table)] * 2,
        )
        server_on, table_exists, reloptions = cursor.fetchone()
    if not table_exists:
        return AutovacuumState(server_on=server_on, table_options=None)
    options = dict(option.split("=", 1) for option in reloptions or ())
    return AutovacuumState(server_on=server_on, table_options=options)


def autovacuum_findings(state: AutovacuumState | None) -> list[Finding]:
    """What is wrong with ``state``: the server's autovacuum off (or the table's own
    ``autovacuum_enabled`` off), or migration 0002's options missing from the table.
    Nothing for None (not PostgreSQL) and for a table not migrated yet."""
    if state is None:
        return []
    table = TriggerInstance._meta.db_table
    findings = []
    table_disabled = (state.table_options or {}).get("autovacuum_enabled", "on").lower()
    if not state.server_on:
        findings.append(
            Finding(
                SERVER_OFF,
                "PostgreSQL's `autovacuum` is off: the queue table "
                f"{table} gets a dead row version with every claim and outcome, and "
                "without vacuum its indexes bloat and claims slow down within minutes",
                "set `autovacuum = on` in postgresql.conf and reload; see "
                'docs/operations.md, "The database"',
            )
        )
    elif table_disabled in _FALSE:
        findings.append(
            Finding(
                SERVER_OFF,
                f"autovacuum is off for the queue table {table} (its "
                "autovacuum_enabled): it gets a dead row version with every claim and "
                "outcome, and without vacuum its indexes bloat and claims slow down",
                f"ALTER TABLE {table} RESET (autovacuum_enabled); see "
                'docs/operations.md, "The database"',
            )
        )
    missing = [name for name in QUEUE_TABLE_OPTIONS if name not in (state.table_options or {})]
    if state.table_options is not None and missing:
        findings.append(
            Finding(
                QUEUE_TABLE_UNTUNED,
                f"the queue table {table} lacks its autovacuum settings "
                f"({', '.join(missing)}): it is vacuumed only once 20% of it is dead",
                "set them again: the ALTER TABLE of migration triggers "
                '0002_queue_table_autovacuum; see docs/operations.md, "The database"',
            )
        )
    return findings


def autovacuum_warnings() -> tuple[str, ...] | None:
    """The findings' messages for ``/readyz``, read at most once a minute per process:
    empty when all is well or when the database cannot be read (the readiness probe
    reports that itself); None on a database other than PostgreSQL."""
    if not db.is_postgres():
        return None

    def load() -> tuple[str, ...] | None:
        try:
            return tuple(f.message for f in autovacuum_findings(autovacuum_state()))
        except DatabaseError:  # not cached: read again next time
            logger.warning("could not read the autovacuum settings", exc_info=True)
            return None

    return _cache.get_or_load("findings", load) or ()


@register(deploy=True)
def check_autovacuum(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """``check --deploy``: a database it cannot reach (a build step, no server yet) is
    not this check's finding; it says nothing then."""
    try:
        state = autovacuum_state()
    except DatabaseError:
        return []
    return [Warning(f.message, hint=f.hint, id=f.id) for f in autovacuum_findings(state)]
