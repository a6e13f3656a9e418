"""Identifiers of rows that are written at a high rate (trigger instances).

UUID version 7 (RFC 9562): a millisecond timestamp, then random bits. Instances created
together sit together in every index that leads with their id (the primary key, the
deliveries', inbox's, step logs' and audit rows' composite indexes), so a step's index
writes land on a few recent pages instead of a random page of a large index - which
after each checkpoint costs a full-page image in the WAL and, past shared_buffers, a
read. Still 74 random bits: as unguessable as a UUID needs to be here, and the creation
time it reveals is in the API's ``created_at`` anyway.
"""

from __future__ import annotations

import os
import time
import uuid

_VERSION = 0x7 << 76
_VARIANT = 0x2 << 62  # RFC 9562's variant (0b10)
_KEEP = ~((0xF << 76) | (0x3 << 62))


def uuid7() -> uuid.UUID:
    """A new UUID version 7 (Python 3.14's ``uuid.uuid7`` where there is one)."""
    native = getattr(uuid, "uuid7", None)
    if native is not None:
        return native()
    ms = time.time_ns() // 1_000_000
    value = (ms & 0xFFFF_FFFF_FFFF) << 80 | int.from_bytes(os.urandom(10), "big")
    return uuid.UUID(int=(value & _KEEP) | _VERSION | _VARIANT)


# ``uuid7()`` in SQL (PostgreSQL 15 has no ``uuidv7()``), evaluated per row: a random
# UUID whose first 48 bits become the millisecond clock and whose version becomes 7 (the
# variant bits of ``gen_random_uuid()`` are RFC 9562's already).
UUID7_SQL = (
    "encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) placing"
    " substring(int8send(floor(extract(epoch from clock_timestamp()) * 1000)::bigint)"
    " from 3) from 1 for 6), 52, 1), 53, 1), 'hex')::uuid"
)


def short_id(value: uuid.UUID | str) -> str:
    """The 8 characters an operator tells instances apart by: the id's end, which is
    random in every version (a version 7 id begins with its creation time, so ids
    created within a minute share their first 8)."""
    return str(value)[-8:]
