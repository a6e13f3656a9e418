"""Where the state machine's writes go: PostgreSQL statements or the ORM, chosen once.

The machine (``machine``, ``creation``) decides *what* changes - the fenced conditions,
the new values, the audit row (``shapes``) - and hands that to a store that writes it:
``postgres`` as single statements (one round trip each), ``orm`` through Django's ORM
in one transaction (SQLite, ``make run``). Both pass the same tests (pytest marker
``both_databases``).
"""

from __future__ import annotations

import functools

from django.db import connection

from . import orm, postgres
from .shapes import Store


@functools.cache
def store() -> Store:
    """The store for the default database (one per process)."""
    return postgres if connection.vendor == "postgresql" else orm
