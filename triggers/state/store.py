"""Where the state machine's writes go: PostgreSQL statements or the ORM, chosen once.

The machine (``machine``, ``creation``) decides *what* changes - the fenced conditions,
the new values, the audit row (``shapes``) - and hands that to ``STATE_STORE``, an
``InstanceStore`` that writes it: ``PostgresInstanceStore`` (``postgres``) as single
statements (one round trip each), ``OrmInstanceStore`` (``orm``) through Django's ORM
in one transaction (SQLite, ``make run``). Both pass the same tests (pytest marker
``both_databases``).
"""

from __future__ import annotations

from notifyflow import db

from .orm import OrmInstanceStore
from .postgres import PostgresInstanceStore
from .shapes import InstanceStore

STATE_STORE: InstanceStore = db.per_database(postgres=PostgresInstanceStore, other=OrmInstanceStore)
