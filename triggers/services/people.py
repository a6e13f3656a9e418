"""Triggering people: a trigger that names ``recipients`` gets one instance
per distinct recipient, all under the request's idempotency key; ``{list: key}`` entries
are expanded later by a fan-out job (``triggers.fanout``).

Uniqueness is the database's: (recipient, workflow, idempotency_key) is unique, and the
instances go in with one INSERT ... ON CONFLICT DO NOTHING (``state.create_bulk``), so a
repeat - or a resend after a partial failure, however much later - creates only what is
missing, and concurrent identical requests create each instance once.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from django.db import transaction
from django.utils import timezone

from api_keys.models import ApiKey
from notifyflow import metrics
from notifyflow.errors import ApplicationError
from recipients.models import RecipientList
from recipients.services import recipients_upsert
from workflows.models import Workflow, WorkflowVersion

from .. import state
from ..dispatch import dispatch_many_on_commit
from ..fanout import fanout_start
from ..models import FanOut, TriggerInstance
from ..recipient_rows import recipient_rows
from .creation import _startable_version, idempotency_conflict, resolve_workflow

logger = logging.getLogger("notifyflow.triggers")

MAX_RECIPIENTS = 1000


@dataclass(frozen=True)
class RecipientEntry:
    """One entry of ``recipients``, validated at the edge: a recipient ``id`` alone
    (created empty if unknown), an inline recipient (``id`` and the ``fields`` to upsert),
    or a list (``list_key``)."""

    id: str | None = None
    fields: Mapping[str, Any] | None = None
    list_key: str | None = None


@dataclass(frozen=True)
class RecipientInstance:
    recipient: str
    id: uuid.UUID
    status: Literal["created", "duplicate"]


@dataclass(frozen=True)
class PeopleTriggerResult:
    """The answer to a trigger naming recipients: one entry per distinct recipient named
    directly (ids and inline objects), in the order first named; the fan-out of its
    lists, if any."""

    workflow: Workflow
    idempotency_key: str
    instances: list[RecipientInstance] = field(default_factory=list)
    fanout: FanOut | None = None
    fanout_created: bool = False

    @property
    def created(self) -> bool:
        """Whether the request created anything (201) or only found it all (200)."""
        return self.fanout_created or any(i.status == "created" for i in self.instances)


def trigger_create_for_recipients(
    *,
    workflow: Workflow | str,
    idempotency_key: str,
    payload: dict[str, Any],
    recipients: Sequence[RecipientEntry],
    actor: str = "api",
    api_key: ApiKey | None = None,
    test: bool = False,
) -> PeopleTriggerResult:
    """Create one instance per distinct recipient of ``recipients`` (inline recipients
    upserted, unknown ids created empty, in the same transaction), or find the ones that
    exist; start the fan-out of its lists (once per key). First steps and the fan-out
    job are sent after commit.

    Raises ApplicationError: ``too_many_recipients``; ``unknown_list`` naming
    ``recipients[i]``; an unknown, inactive or empty workflow (unless everything the
    request names exists already: a replay answers whatever the workflow's state now);
    ``idempotency_conflict`` if an existing instance is one ``api_key`` may not read.
    ``test``: the new instances are test sends (``is_test``, left out of the stats).
    """
    if len(recipients) > MAX_RECIPIENTS:
        raise ApplicationError(
            code="too_many_recipients",
            field="recipients",
            message=f"recipients: at most {MAX_RECIPIENTS} entries per trigger",
        )
    wf = resolve_workflow(workflow)
    direct, upserts, lists = _entries(recipients)
    created_by_key = api_key.name if api_key is not None else ""
    with transaction.atomic():
        _require_lists(lists)
        try:
            version: WorkflowVersion | None = _startable_version(wf)
        except ApplicationError:
            version = None
        if version is None:
            return _replay_only(wf, idempotency_key, direct, lists, api_key)
        recipients_upsert(items=upserts, actor=actor)
        rows = recipient_rows(
            workflow_id=wf.pk,
            version=version,
            idempotency_key=idempotency_key,
            payload=payload,
            recipient_ids=direct,
            created_by_key=created_by_key,
            workflow_key=wf.key,
            concurrency_key_template=wf.concurrency_key_template,
            lane=wf.priority,
        )
        inserted = state.create_bulk(rows=rows, now=timezone.now(), actor=actor)
        instances = _settle(wf, idempotency_key, rows, inserted, api_key)
        if test and inserted:
            # Marked in the creating transaction: no worker sees it unmarked (the
            # first steps are dispatched on commit).
            TriggerInstance.objects.filter(pk__in=inserted).update(is_test=True)
        fanout, fanout_created = None, False
        if lists:
            fanout, fanout_created = fanout_start(
                workflow=wf,
                version=version,
                idempotency_key=idempotency_key,
                payload=payload,
                lists=list(lists),
                excluded=direct,
                created_by_key=created_by_key,
                actor=actor,
            )
            if not fanout_created:
                _require_readable(fanout.created_by_key, wf, api_key)
        dispatch_many_on_commit((row.id, row.lane) for row in rows if row.id in inserted)
    created = sum(1 for i in instances if i.status == "created")
    if not test:  # a test send is left out of the counters as out of the stats
        metrics.TRIGGERS.labels("created").inc(created)
        metrics.TRIGGERS.labels("replayed").inc(len(instances) - created)
    logger.info(
        "trigger for recipients",
        extra={
            "nf": {
                "workflow": wf.key,
                "actor": actor,
                "created": created,
                "duplicates": len(instances) - created,
                "fanout": str(fanout.pk) if fanout else None,
            }
        },
    )
    return PeopleTriggerResult(wf, idempotency_key, instances, fanout, fanout_created)


def _entries(
    recipients: Sequence[RecipientEntry],
) -> tuple[list[str], list[Mapping[str, Any]], dict[str, int]]:
    """The distinct recipient ids named directly (first-named order), the upsert items
    (inline objects with their fields; bare ids, created empty if unknown), and the
    distinct list keys with the index of their first entry."""
    direct: dict[str, None] = {}
    upserts: list[Mapping[str, Any]] = []
    lists: dict[str, int] = {}
    for index, entry in enumerate(recipients):
        if entry.list_key is not None:
            lists.setdefault(entry.list_key, index)
            continue
        assert entry.id is not None
        direct.setdefault(entry.id, None)
        upserts.append({**(entry.fields or {}), "id": entry.id})
    return list(direct), upserts, lists


def _require_lists(lists: Mapping[str, int]) -> None:
    if not lists:
        return
    found = set(RecipientList.objects.filter(key__in=list(lists)).values_list("key", flat=True))
    for key, index in lists.items():
        if key not in found:
            raise ApplicationError(
                code="unknown_list",
                field=f"recipients[{index}]",
                message=f"recipients[{index}]: no list with key {key!r}",
            )


def _settle(
    wf: Workflow,
    idempotency_key: str,
    rows: Sequence[state.NewInstance],
    inserted: set[uuid.UUID],
    api_key: ApiKey | None,
) -> list[RecipientInstance]:
    """Each row's outcome: created, or the existing instance of its recipient (read back
    in one query; a concurrent writer's row is committed: ON CONFLICT waited for it)."""
    lost = [row.recipient_id for row in rows if row.id not in inserted]
    existing = _existing(wf, idempotency_key, [r for r in lost if r is not None])
    for _instance_id, by in existing.values():
        _require_readable(by, wf, api_key)
    out = []
    for row in rows:
        assert row.recipient_id is not None
        if row.id in inserted:
            out.append(RecipientInstance(row.recipient_id, row.id, "created"))
        else:
            found = existing.get(row.recipient_id)
            if found is None:  # the row that blocked the INSERT was deleted meanwhile
                raise ApplicationError(
                    code="busy",
                    field=None,
                    status=409,
                    message="another request changed this key; try again",
                )
            out.append(RecipientInstance(row.recipient_id, found[0], "duplicate"))
    return out


def _existing(
    wf: Workflow, idempotency_key: str, recipient_ids: Sequence[str]
) -> dict[str, tuple[uuid.UUID, str]]:
    """recipient id -> (instance id, creating key) of the key's existing instances."""
    if not recipient_ids:
        return {}
    rows = (
        TriggerInstance.objects.order_by()
        .filter(workflow=wf, idempotency_key=idempotency_key, recipient_id__in=recipient_ids)
        .values_list("recipient_id", "id", "created_by_key")
    )
    return {recipient: (instance_id, by) for recipient, instance_id, by in rows}


def _require_readable(created_by_key: str, wf: Workflow, api_key: ApiKey | None) -> None:
    if api_key is not None and not api_key.may_read(
        workflow_key=wf.key, created_by_key=created_by_key
    ):
        raise idempotency_conflict()


def _replay_only(
    wf: Workflow,
    idempotency_key: str,
    direct: Sequence[str],
    lists: Mapping[str, int],
    api_key: ApiKey | None,
) -> PeopleTriggerResult:
    """The workflow cannot start an instance now (inactive, no definition): still a
    replay if everything the request names exists; else the workflow's error."""
    existing = _existing(wf, idempotency_key, direct)
    fanout = FanOut.objects.filter(workflow=wf, idempotency_key=idempotency_key).first()
    if len(existing) < len(direct) or (lists and fanout is None):
        _startable_version(wf)  # raises the reason
    for _instance_id, by in existing.values():
        _require_readable(by, wf, api_key)
    instances = [RecipientInstance(r, existing[r][0], "duplicate") for r in direct]
    return PeopleTriggerResult(wf, idempotency_key, instances, fanout if lists else None)
