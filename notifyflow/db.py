"""The one module that knows which database it is, and the engine's prepared statements.

Which database: ``is_postgres()`` is the only place the question is asked (the default
database once per process; a given connection, e.g. a migration's, each time), and
``per_database(postgres=..., other=...)`` makes each concern's store for it once, when
the concern's module is imported: every other module calls a typed store
(``triggers.state.store.STATE_STORE``, ``executions.recording.RECORDER``, ...) and
never asks. The few dialect differences too small for a store are the helpers at the
end of this module (``in_subquery``, ``uuid_in``, ``set_local``, ...).

Prepared statements for the engine's few hot statements (PostgreSQL).

Django's psycopg cursors bind client-side, so PostgreSQL parses and plans every
statement again. A step's statements (the claim, a push's 'sending' marker, the
outcome) are large CTEs whose planning was a large share of PostgreSQL's CPU per step
(docs/measurements.md, "Prepared statements and parsing"; bench/engine_probe.py
--inproc): they are prepared once per connection and shape. Every other query keeps
Django's usual client-side binding.

Only statements whose every plan is a primary-key or unique-key probe belong here: a
prepared statement switches to a generic plan after a few executions, which would not
use a partial index a parameter decides. ``NOTIFYFLOW_DB_PREPARE=0`` turns this off
(e.g. behind a transaction-mode pooler that does not track prepared statements).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, InterfaceError, OperationalError, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created
from django.db.backends.utils import CursorDebugWrapper, CursorWrapper
from django.db.models import Model, Q
from django.db.models.expressions import RawSQL

_NEVER_AUTOMATICALLY = 2**31

# --- which database it is: asked here only ---------------------------------------------

POSTGRESQL = "postgresql"

T = TypeVar("T")


def is_postgres(connection: BaseDatabaseWrapper | None = None) -> bool:
    """Whether ``connection`` is PostgreSQL; without one, whether the default database
    is (decided once per process: the tests choose their database per process, through
    ``DATABASE_URL``, never inside one)."""
    if connection is None:
        return _default_is_postgres()
    return connection.vendor == POSTGRESQL


@functools.cache
def _default_is_postgres() -> bool:
    # The connection's vendor, not the settings: no connection is opened to read it.
    return connections[DEFAULT_DB_ALIAS].vendor == POSTGRESQL


def per_database(*, postgres: Callable[[], T], other: Callable[[], T]) -> T:
    """A concern's store for the default database: ``postgres()`` on PostgreSQL,
    ``other()`` elsewhere (SQLite: ``make run``, the tests' default). Each concern calls
    it once, in a typed module constant next to its two store classes (its module
    imports models, so it is imported after Django's set-up)."""
    return postgres() if is_postgres() else other()


# What a lost database connection raises (server restarted or failed over, backend
# terminated): psycopg's "the connection is closed", "server closed the connection
# unexpectedly", "terminating connection due to administrator command".
DATABASE_LOST = (OperationalError, InterfaceError)

# psycopg caches the parsing of a query's placeholders (an LRU of 128 query texts) only
# for queries with at most 50 parameters, against huge generated IN lists. A step's
# outcome statement has more and was parsed again on every step, a visible share of a
# step's in-process CPU (bench/engine_probe.py, alternating). The engine's statements come in a
# handful of shapes, so raise the bound (a no-op if psycopg renames it; only speed).
PARSE_CACHE_MAX_PARAMS = 128


def _raise_parse_cache_bound() -> None:
    from psycopg import _queries

    if getattr(_queries, "MAX_CACHED_STATEMENT_PARAMS", PARSE_CACHE_MAX_PARAMS) < (
        PARSE_CACHE_MAX_PARAMS
    ):
        _queries.MAX_CACHED_STATEMENT_PARAMS = PARSE_CACHE_MAX_PARAMS


def current() -> BaseDatabaseWrapper:
    """The default database's connection wrapper itself. ``django.db.connection`` is a
    proxy: every attribute read through it is a thread-local lookup, and the engine's
    statement builders pass it to dozens of ``get_db_prep_*`` calls per step, each
    reading several attributes (measurable: bench/engine_probe.py --inproc).
    Resolve it once per statement instead."""
    return connections[DEFAULT_DB_ALIAS]


# Field classes whose value goes to psycopg as it is: Django's ``get_db_prep_save`` for
# them only walks three methods to hand the same value back (on PostgreSQL). The hot
# statement builders pass ~50 values a step through it (``prep_save``).
_PASSED_AS_IS = (
    "AutoField",
    "BigAutoField",
    "BigIntegerField",
    "BooleanField",
    "CharField",
    "IntegerField",
    "PositiveIntegerField",
    "PositiveSmallIntegerField",
    "SmallIntegerField",
    "TextField",
)


def _as_is(value: Any) -> Any:
    return value


def _uuid(value: Any) -> Any:
    """A UUID column's value: a UUID as it is, its text form parsed (as Django does)."""
    return value if value is None or isinstance(value, uuid.UUID) else uuid.UUID(str(value))


def _aware_datetime(field: Any) -> Callable[[Any], Any]:
    """A ``timestamptz`` column's value: an aware datetime (or None) as it is, which is
    what Django hands psycopg for one; anything else (a naive datetime: Django warns
    and makes it aware) through Django."""
    slow = functools.partial(_prep_save, field)

    def prep(value: Any) -> Any:
        if value is None or (isinstance(value, datetime) and value.tzinfo is not None):
            return value
        return slow(value)

    return prep


def _jsonb(field: Any) -> Callable[[Any], Any]:
    """A ``jsonb`` column's value as Django's PostgreSQL operations make it
    (``adapt_json_value``: ``Jsonb`` with the field's encoder), without the five calls
    into Django per value; None is SQL NULL, as in ``JSONField.get_db_prep_save``. An
    expression goes through Django."""
    from django.db.backends.postgresql.operations import get_json_dumps
    from django.db.backends.postgresql.psycopg_any import Jsonb

    dumps = get_json_dumps(field.encoder)
    slow = functools.partial(_prep_save, field)

    def prep(value: Any) -> Any:
        if value is None:
            return None
        if hasattr(value, "as_sql") or hasattr(value, "resolve_expression"):
            return slow(value)
        return Jsonb(value, dumps=dumps)

    return prep


def prep_save(field: Any) -> Callable[[Any], Any]:
    """``field.get_db_prep_save`` for the default database, as a one-argument callable;
    for the field types PostgreSQL's driver takes as they are (``_PASSED_AS_IS``, a
    foreign key to one of them) the value itself, with no call into Django; for aware
    datetimes and JSON what Django would make of them, directly (``_aware_datetime``,
    ``_jsonb``: a step passes ~17 such values, each a walk through Django's field and
    operations classes). Only for values of the field's Python type (or None), as the
    hot builders have.

    Kept on the field itself: a cache keyed by the field would hash it (Django's
    ``Field.__hash__`` builds a tuple) for each of a step's ~70 values."""
    try:
        return field._notifyflow_prep_save
    except AttributeError:
        prep = _prep_save_for(field)
        field._notifyflow_prep_save = prep
        return prep


def _prep_save_for(field: Any) -> Callable[[Any], Any]:
    target = getattr(field, "target_field", None) if field.is_relation else field
    django_type = (
        type(target).__name__
        if target is not None and type(target).__module__.startswith("django.db.models")
        else ""
    )
    if not is_postgres():
        return functools.partial(_prep_save, field)
    if django_type == "UUIDField":
        return _uuid
    if django_type in _PASSED_AS_IS:
        return _as_is
    if django_type == "DateTimeField" and settings.USE_TZ:
        return _aware_datetime(field)
    if django_type == "JSONField":
        return _jsonb(field)
    return functools.partial(_prep_save, field)


def _prep_save(field: Any, value: Any) -> Any:
    return field.get_db_prep_save(value, current())


def execute(cursor: CursorWrapper, sql: str, params: Sequence[Any]) -> Any:
    """``cursor.execute(sql, params)``, as a server-side prepared statement on
    PostgreSQL. Returns the cursor to fetch from (``fetchone``/``fetchall``).

    Goes through Django's execute wrappers, error translation (``OperationalError``
    for a lost connection, as usual) and query log, so tests and
    ``CaptureQueriesContext`` see it like any other statement."""
    db = cursor.db
    if not is_postgres(db) or not settings.NOTIFYFLOW_DB_PREPARE:
        cursor.execute(sql, params)
        return cursor
    import psycopg

    _raise_parse_cache_bound()
    # A server-binding cursor on the same session (same adapters: Django's JSON and
    # time zone handling); psycopg keeps the prepared statements per connection.
    conn = db.connection
    if conn.prepare_threshold is None:
        # Django opens connections with None, which makes psycopg ignore even an
        # explicit prepare=True. Django's own cursors bind client-side and never
        # prepare whatever the threshold; only these explicit calls do.
        conn.prepare_threshold = _NEVER_AUTOMATICALLY
    raw = psycopg.Cursor(conn)

    def executor(sql: str, params: Any, many: bool, context: Any) -> None:
        with db.wrap_database_errors:
            raw.execute(sql, params, prepare=True)

    if isinstance(cursor, CursorDebugWrapper):
        # The query log shows the statement with its values, as for client-side
        # binding (tools EXPLAIN what they capture).
        with cursor.debug_sql(db.ops.compose_sql(sql, params), params):
            cursor._execute_with_wrappers(sql, params, False, executor)
    else:
        cursor._execute_with_wrappers(sql, params, False, executor)
    return raw


def fetch_prepared(sql: str, params: Sequence[Any], *, many: bool = False) -> Any:
    """The row (``many``: the rows) of one of the engine's prepared statements
    (``execute``). When nothing watches the connection's statements (no query log, no
    execute wrapper) it runs straight on psycopg's connection, on a cursor kept for the
    connection: Django's cursor wrapper, made and closed for every statement, and a
    new psycopg cursor each time were a few per cent of a step's CPU
    (bench/RESULTS.md, "Issue 44, third round") and a third of a polled read's
    (``GET /feed/counts/``, polled every few seconds by every open page:
    bench/scenarios/feed.py). Same errors as any statement (``wrap_database_errors``:
    a lost database is a 503 as anywhere); a watched connection takes ``execute``'s
    path (tests/feed/test_services.py compares the two)."""
    wrapper = current()
    if (
        is_postgres(wrapper)
        and settings.NOTIFYFLOW_DB_PREPARE
        and not wrapper.queries_logged
        and not wrapper.execute_wrappers
    ):
        wrapper.close_if_health_check_failed()
        wrapper.ensure_connection()
        cursor = _kept_cursor(wrapper)
        with wrapper.wrap_database_errors:
            cursor.execute(sql, params, prepare=True)
            return cursor.fetchall() if many else cursor.fetchone()
    with wrapper.cursor() as django_cursor:
        found = execute(django_cursor, sql, params)
        return found.fetchall() if many else found.fetchone()


def _kept_cursor(wrapper: BaseDatabaseWrapper) -> Any:
    """The psycopg cursor ``fetch_prepared`` keeps on ``wrapper`` for its current
    connection (a new one after a reconnection)."""
    import psycopg

    conn = wrapper.connection
    kept = getattr(wrapper, "_notifyflow_cursor", None)
    if kept is None or kept.connection is not conn or kept.closed:
        _raise_parse_cache_bound()
        if conn.prepare_threshold is None:  # as in ``execute``
            conn.prepare_threshold = _NEVER_AUTOMATICALLY
        kept = psycopg.Cursor(conn)
        wrapper._notifyflow_cursor = kept  # type: ignore[attr-defined]
    return kept


# --- timestamps past the calendar ------------------------------------------------------

_edge_loader: type | None = None


def _edge_tolerant_loader() -> type:
    """Django's time zone loader for ``timestamptz``, reading a value Python cannot
    represent (year 10000 or later, 'infinity'; before year 1, BC, '-infinity') as
    ``datetime.max`` / ``datetime.min`` in UTC instead of raising: psycopg's DataError
    would make every page that lists the row answer 500."""
    global _edge_loader
    if _edge_loader is None:
        from datetime import UTC

        from django.db.backends.postgresql.psycopg_any import BaseTzLoader
        from psycopg import DataError

        class EdgeTolerantTzLoader(BaseTzLoader):
            timezone = UTC

            def load(self, data: Any) -> datetime:
                # The session's own form (DateStyle ISO, TimeZone UTC: what Django
                # sets) parsed in C: psycopg's Python parser under Django's subclass
                # was a few per cent of a step (bench/RESULTS.md, "Issue 44, third
                # round"). Anything else (another offset or DateStyle, BC, infinity)
                # goes the general way.
                try:
                    value = datetime.fromisoformat(str(data, "ascii"))
                except ValueError:
                    value = None
                if value is not None and value.tzinfo is UTC:
                    return value
                try:
                    return super().load(data)
                except DataError:
                    text = bytes(data)
                    before = text.startswith(b"-") or text.endswith(b" BC")
                    return (datetime.min if before else datetime.max).replace(tzinfo=UTC)

        _edge_loader = EdgeTolerantTzLoader
    return _edge_loader


def tolerate_out_of_range_timestamps(*, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    """``connection_created`` receiver: timestamps outside Python's calendar are read at
    its edges (``_edge_tolerant_loader``), so no stored value makes a read fail. Every
    write path range-checks what it stores; this covers rows written before, or by hand.
    Only with USE_TZ (Django's loader then converts to UTC, as this one does)."""
    if not is_postgres(connection) or not settings.USE_TZ:
        return
    connection.connection.adapters.register_loader("timestamptz", _edge_tolerant_loader())


# --- the few other differences between PostgreSQL and SQLite ---------------------------


def in_subquery(column: str, subquery: str) -> str:
    """``column IN (subquery)`` as a condition. On PostgreSQL the subquery's ids become
    an array the primary key is probed with: a plan that cannot start from another
    index instead and probe the subquery for every row."""
    if is_postgres():
        return f"{column} = ANY (ARRAY({subquery}))"
    return f"{column} IN ({subquery})"


def uuid_in(field: str, values: Sequence[Any]) -> Q:
    """``field IN values`` for many UUIDs. On PostgreSQL the values are one array
    parameter (``IN (SELECT unnest(%s::uuid[]))``): psycopg parses a query's
    placeholders on every execution past its cache, and a query with thousands of them
    spent most of its time there (docs/measurements.md, "A cancelled backlog")."""
    if is_postgres():
        return Q(**{f"{field}__in": RawSQL("SELECT unnest(%s::uuid[])", [list(values)])})
    return Q(**{f"{field}__in": list(values)})


def set_local(name: str, value: str) -> None:
    """``SET LOCAL name = value`` for the current transaction (PostgreSQL; elsewhere
    nothing: the custom settings it sets are read only by PostgreSQL triggers)."""
    if is_postgres():
        with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
            cursor.execute("SELECT set_config(%s, %s, true)", [name, value])


def commit_asynchronously() -> None:
    """Every new PostgreSQL connection of this process commits asynchronously (a worker;
    executions.worker_hooks); a statement that must survive a crash turns synchronous
    commit back on for itself. Nothing on other databases."""
    if is_postgres():
        connection_created.connect(
            _set_async_commit, weak=False, dispatch_uid="nf_set_async_commit"
        )


def _set_async_commit(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    if is_postgres(connection):
        with connection.cursor() as cursor:
            cursor.execute("SET synchronous_commit TO off")


def table_row_estimate(model: type[Model], using: str = DEFAULT_DB_ALIAS) -> int | None:
    """PostgreSQL's planner estimate of a table's row count (ANALYZE/autovacuum keep it
    current), or None when unknown: not PostgreSQL, or never analyzed (-1 on PG 14+)."""
    connection = connections[using]
    if not is_postgres(connection):
        return None
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT reltuples::bigint FROM pg_class WHERE oid = to_regclass(%s)",
            [connection.ops.quote_name(model._meta.db_table)],
        )
        row = cursor.fetchone()
    if row is None or row[0] is None or row[0] < 0:
        return None
    return int(row[0])
