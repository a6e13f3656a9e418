"""Creating many trigger instances in one request (POST /triggers/bulk/): each item
with the single POST's semantics, one batched insert (and a lookup of the keys it lost)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from django.db import transaction
from django.utils import timezone

from api_keys.models import ApiKey
from notifyflow import metrics
from notifyflow.errors import ApplicationError, ConflictError
from workflows.models import Workflow

from .. import state
from ..dispatch import dispatch_many_on_commit
from ..models import TriggerInstance
from .creation import idempotency_conflict, new_row, resolve_workflow
from .people import PeopleTriggerResult, RecipientEntry, trigger_create_for_recipients

logger = logging.getLogger("notifyflow.triggers")

MAX_BULK_ITEMS = 1000


@dataclass(frozen=True)
class TriggerItem:
    """One trigger of a bulk request, validated at the edge as the single POST's body."""

    workflow: str
    idempotency_key: str
    payload: dict[str, Any]
    # A trigger naming recipients: created on its own, per-recipient answer.
    recipients: Sequence[RecipientEntry] | None = None


@dataclass(frozen=True)
class BulkOutcome:
    """What became of one item: ``created`` / ``duplicate`` (``instance_id`` set) or
    ``invalid`` (``error`` set, as the single POST would have raised it)."""

    status: Literal["created", "duplicate", "invalid"]
    instance_id: uuid.UUID | None = None
    error: ApplicationError | None = None
    # An item naming recipients: its instances and fan-out (status created if anything
    # was created, else duplicate).
    people: PeopleTriggerResult | None = None


def trigger_create_bulk(
    *,
    items: Sequence[TriggerItem | ApplicationError],
    actor: str = "api",
    api_key: ApiKey | None = None,
) -> list[BulkOutcome]:
    """``trigger_create`` for many items at once, one outcome per item, in order.

    Each item has the single call's semantics, as if the items were posted one after
    the other: a replay of an existing (workflow, key) - or of an earlier item of the
    same request - is a ``duplicate`` answered before the workflow's state is checked;
    an unknown, inactive or empty workflow or an interest that does not render makes
    that item ``invalid`` and nothing else; so does a replay of an instance ``api_key``
    may not read (``idempotency_conflict``, no id). An ``ApplicationError`` in ``items``
    is an item the edge already refused; it is passed through as ``invalid``.

    The new instances, their audit rows and interests are one INSERT ... ON CONFLICT
    statement (PostgreSQL); a concurrent writer that took a key first makes that item a
    duplicate of its row. All first steps are published after commit in one pipeline.
    """
    if len(items) > MAX_BULK_ITEMS:
        raise ApplicationError(
            code="too_many_items",
            field="items",
            message=f"items: at most {MAX_BULK_ITEMS} items per request",
        )
    bulk = _Bulk(
        api_key=api_key,
        created_by_key=api_key.name if api_key is not None else "",
        records=[_BulkRecord(item) for item in items],
    )
    _people(bulk.records, actor, api_key)
    pending = _bulk_resolve(bulk.records)
    # No lookup before the INSERT: a key that exists loses its row to ON CONFLICT and is
    # read afterwards with the keys lost to concurrent writers (``_bulk_settle``), so a
    # request of new keys costs one statement. Only an item whose workflow cannot start
    # an instance is looked up first: a replay is answered whatever the workflow's state.
    refused = _bulk_plan(bulk, pending)
    if refused:
        existing = _existing_ids({record.pair for record in refused})
        for record in refused:
            if record.pair in existing:
                bulk.replay(record, existing[record.pair])
    rows = [record.row for record in pending if record.row is not None]
    inserted = state.create_bulk(rows=rows, now=timezone.now(), actor=actor)
    _bulk_settle(bulk, pending, inserted)
    if inserted:
        dispatch_many_on_commit((row.id, row.lane) for row in rows if row.id in inserted)
    return _bulk_outcomes(bulk.records, actor)


@dataclass
class _BulkRecord:
    """One item of a bulk request as the phases decide it: its workflow, then either an
    outcome (replay, refusal), the row it inserts, or the earlier item of the same
    request whose key it repeats."""

    item: TriggerItem | ApplicationError
    workflow: Workflow | None = None
    row: state.NewInstance | None = None
    first: _BulkRecord | None = None
    created: bool = False
    outcome: BulkOutcome | None = None

    @property
    def pair(self) -> tuple[int, str]:
        """(workflow id, idempotency key): what the unique constraint decides on."""
        assert self.workflow is not None and isinstance(self.item, TriggerItem)
        return (self.workflow.pk, self.item.idempotency_key)


@dataclass
class _Bulk:
    api_key: ApiKey | None
    created_by_key: str
    records: list[_BulkRecord]

    def replay(self, record: _BulkRecord, existing: _Existing | None) -> None:
        assert record.workflow is not None
        record.outcome = _replay_outcome(existing, record.workflow.key, self.api_key)


def _people(records: list[_BulkRecord], actor: str, api_key: ApiKey | None) -> None:
    """Items naming recipients: each as its own POST, in its own savepoint (one that
    fails is ``invalid`` and leaves the others' instances in place)."""
    for record in records:
        item = record.item
        if not isinstance(item, TriggerItem) or item.recipients is None:
            continue
        try:
            with transaction.atomic():
                result = trigger_create_for_recipients(
                    workflow=item.workflow,
                    idempotency_key=item.idempotency_key,
                    payload=item.payload,
                    recipients=item.recipients,
                    actor=actor,
                    api_key=api_key,
                )
        except ApplicationError as exc:
            record.outcome = BulkOutcome("invalid", error=exc)
        else:
            status: Literal["created", "duplicate"] = "created" if result.created else "duplicate"
            record.outcome = BulkOutcome(status, people=result)


def _bulk_resolve(records: list[_BulkRecord]) -> list[_BulkRecord]:
    """Refuse what the edge refused or has no key, resolve each item's workflow; the
    records still to decide, in order. Each workflow key is resolved once per request
    (the process cache's lookup was ~3 us an item)."""
    pending = []
    workflows: dict[str, Workflow | ApplicationError] = {}
    for record in records:
        item = record.item
        if record.outcome is not None:
            continue  # decided already (an item naming recipients)
        if isinstance(item, ApplicationError):
            record.outcome = BulkOutcome("invalid", error=item)
        elif not item.idempotency_key:
            record.outcome = BulkOutcome(
                "invalid",
                error=ApplicationError(
                    code="required",
                    field="idempotency_key",
                    message="idempotency_key: must be a non-empty string",
                ),
            )
        else:
            found = workflows.get(item.workflow)
            if found is None:
                try:
                    found = resolve_workflow(item.workflow)
                except ApplicationError as exc:
                    found = exc
                workflows[item.workflow] = found
            if isinstance(found, ApplicationError):
                record.outcome = BulkOutcome("invalid", error=found)
            else:
                record.workflow = found
                pending.append(record)
    return pending


def _bulk_plan(bulk: _Bulk, pending: list[_BulkRecord]) -> list[_BulkRecord]:
    """Each pending record repeats an earlier item of the request or gets the row it
    inserts (the first valid item of its key); a workflow that cannot start one makes it
    invalid (and leaves the key to a later item). Returns those refused: each is still a
    replay if its key has an instance."""
    chosen: dict[tuple[int, str], _BulkRecord] = {}
    refused = []
    for record in pending:
        pair = record.pair
        if pair in chosen:
            record.first = chosen[pair]
        else:
            assert record.workflow is not None and isinstance(record.item, TriggerItem)
            try:
                record.row = new_row(
                    record.workflow,
                    record.item.idempotency_key,
                    record.item.payload,
                    created_by_key=bulk.created_by_key,
                )
            except ApplicationError as exc:
                record.outcome = BulkOutcome("invalid", error=exc)
                refused.append(record)
            else:
                chosen[pair] = record
    return refused


def _bulk_settle(bulk: _Bulk, pending: list[_BulkRecord], inserted: set[uuid.UUID]) -> None:
    """The outcome of every record that inserted or repeated a key of this request: its
    row if the INSERT kept it, else the row of the concurrent writer that took the key
    first (committed: ON CONFLICT waited for it)."""
    for record in pending:
        if record.row is not None:
            record.created = record.row.id in inserted
    lost = {record.pair for record in pending if record.row is not None and not record.created}
    winners = _existing_ids(lost) if lost else {}
    for record in pending:
        if record.created:
            assert record.row is not None
            record.outcome = BulkOutcome("created", instance_id=record.row.id)
        elif record.row is not None:
            bulk.replay(record, winners.get(record.pair))
        elif record.first is not None:
            first = record.first
            assert first.row is not None
            mine = _Existing(first.row.id, bulk.created_by_key) if first.created else None
            bulk.replay(record, mine or winners.get(record.pair))


def _bulk_outcomes(records: list[_BulkRecord], actor: str) -> list[BulkOutcome]:
    """The outcomes in item order, counted in the metrics and the log."""
    done = [record.outcome for record in records if record.outcome is not None]
    assert len(done) == len(records)
    counts = {"created": 0, "duplicate": 0, "invalid": 0}
    for outcome in done:
        counts[outcome.status] += 1
    metrics.TRIGGERS.labels("created").inc(counts["created"])
    metrics.TRIGGERS.labels("replayed").inc(counts["duplicate"])
    logger.info(
        "triggers created in bulk",
        extra={"nf": {"actor": actor, **counts}},
    )
    return done


def _replay_outcome(
    existing: _Existing | None, workflow_key: str, api_key: ApiKey | None
) -> BulkOutcome:
    """A bulk item whose key has an instance: ``duplicate`` with its id, or - as the
    single POST - ``idempotency_conflict`` if ``api_key`` may not read it."""
    if existing is not None:
        if api_key is not None and not api_key.may_read(
            workflow_key=workflow_key, created_by_key=existing.created_by_key
        ):
            return BulkOutcome("invalid", error=idempotency_conflict())
        return BulkOutcome("duplicate", instance_id=existing.id)
    # Only if the row that blocked the INSERT vanished again (deleted in between).
    return BulkOutcome(
        "invalid",
        error=ConflictError(
            code="busy", field=None, message="another request changed this key; try again"
        ),
    )


class _Existing(NamedTuple):
    id: uuid.UUID
    created_by_key: str


def _existing_ids(pairs: set[tuple[int, str]]) -> dict[tuple[int, str], _Existing]:
    """(workflow id, key) -> the instance (id, creating key) of those that exist: one
    indexed query per workflow (``idempotency_key IN (...)``, chunked)."""
    by_workflow: dict[int, list[str]] = {}
    for workflow_id, key in pairs:
        by_workflow.setdefault(workflow_id, []).append(key)
    found: dict[tuple[int, str], _Existing] = {}
    for workflow_id, keys in by_workflow.items():
        for start in range(0, len(keys), _KEYS_PER_QUERY):
            rows = (
                TriggerInstance.objects.order_by()
                .filter(
                    workflow_id=workflow_id,
                    idempotency_key__in=keys[start : start + _KEYS_PER_QUERY],
                )
                .values_list("idempotency_key", "id", "created_by_key")
            )
            found.update({(workflow_id, key): _Existing(id, by) for key, id, by in rows})
    return found


_KEYS_PER_QUERY = 500  # SQLite's parameter limit
