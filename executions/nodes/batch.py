"""``batch`` (Knock's batch, Novu's digest): per (workflow, node, recipient,
rendered key) at most one batch is open. The first instance to reach the node opens it
and parks until its window ends (``window`` after it opened, or the next time of the
node's cron ``schedule``: workflows/cron.py); every instance that reaches the node while it is open
joins it: skipped ``batched`` (``vars.batch_<node id>`` = {batch_id, joined}), parked
in the batch (a member cancelled before the close is left out) and completed by the
close. The opener then continues with the digest.

The close is done by whoever gets there first: the opener at the window's end (or
released by an operator's run-now), a flush (API, admin), or the member that fills
``max_items``. Members park until the window's end plus a lease (the opener may be
recovering) and, woken, end at a batch that is no longer open.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import partial
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings

from gates import batches
from gates.models import BatchCloseReason, BatchStatus
from triggers.models import ParkedOn
from workflows import cron
from workflows.definition import ExactlyOneOf, FieldSpec, NodeType, node_types
from workflows.durations import parse_duration

from ..providers.base import ProviderError
from ..step import NodeResult, StepContext

ACTOR = "engine"
MAX_KEY_LENGTH = 255


def execute(step: StepContext) -> NodeResult:
    if step.instance.parked_on in (ParkedOn.BATCH, ParkedOn.OVERRIDE):
        arrival = batches.existing_arrival(instance_id=step.instance_id, node_id=step.node_id)
        if arrival is not None:
            return _reenter(step, arrival)
    person = step.audience.recipient
    arrival = batches.arrive(
        instance_id=step.instance_id,
        workflow_id=step.instance.workflow_id,
        recipient_id=person.id if person is not None else None,
        node_id=step.node_id,
        key=_key(step),
        closes_at=closes_at_for(step),
        max_items=step.config.get("max_items"),
        now=step.now,
    )
    if arrival.opener:
        if arrival.status == BatchStatus.OPEN and step.now < arrival.closes_at:
            return _park_opener(step, arrival)
        return _continue(step, arrival)
    if arrival.filled:  # this arrival reached max_items: the close is ours to do
        batches.close(
            batch_id=arrival.batch_id, now=step.now, actor=ACTOR, reason=BatchCloseReason.MAX_ITEMS
        )
        return _member_ends(step, arrival)
    if arrival.status != BatchStatus.OPEN:  # a re-run after the batch closed
        return _member_ends(step, arrival)
    return _park_member(step, arrival, joined_now=True)


def preview(step: StepContext) -> NodeResult:
    """A preview writes nothing: the digest of a batch holding this payload alone."""
    _key(step)
    payload = step.context.get("payload")
    closes_at = closes_at_for(step)
    return NodeResult(
        output={
            "batch_id": None,
            "count": 1,
            "items": [payload],
            "first": payload,
            "last": payload,
            "opened_at": step.now.isoformat(),
            "closed_at": closes_at.isoformat(),
        },
        vars_key=NODE.vars_key(step.node_id),
    )


def closes_at_for(step: StepContext) -> datetime:
    """When a batch opened now closes: ``window`` after now, or the ``schedule``'s next
    time in its timezone, else the recipient's, else UTC."""
    window = step.config.get("window")
    if window is not None:
        return step.now + parse_duration(window)
    schedule = step.config["schedule"]
    person = step.audience.recipient
    zone = _zone(schedule.get("timezone")) or _zone(person.timezone if person else None)
    closes_at = cron.next_fire(
        cron.parse_cron(schedule["cron"]), after=step.now, zone=zone or ZoneInfo("UTC")
    )
    if closes_at is None:  # refused at save: a definition from before that check
        raise ProviderError(f"schedule: {schedule['cron']!r} never fires", permanent=True)
    return closes_at


def _zone(name: str | None) -> ZoneInfo | None:
    if not name:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def _key(step: StepContext) -> str:
    key = step.render_optional("key") or ""
    if len(key) > MAX_KEY_LENGTH:
        raise ProviderError(
            f"key: renders to {len(key)} characters, over the limit of {MAX_KEY_LENGTH}",
            permanent=True,
        )
    return key


def _reenter(step: StepContext, arrival: batches.Arrival) -> NodeResult:
    """Back at the node after parking in a batch (due, woken, or released by run-now)."""
    override = step.instance.parked_on == ParkedOn.OVERRIDE
    if not arrival.opener:
        if override or arrival.status != BatchStatus.OPEN:
            return _member_ends(step, arrival)
        return _park_member(step, arrival, joined_now=False)
    if arrival.status == BatchStatus.OPEN and not override and step.now < arrival.closes_at:
        return _park_opener(step, arrival)  # an early message: park again, same end
    return _continue(step, arrival)


def _continue(step: StepContext, arrival: batches.Arrival) -> NodeResult:
    """The opener: close the batch (idempotent; its duties done if a filler could not)
    and continue along its edges with the digest. Before its window's end, only an
    operator's run-now released it."""
    early = step.instance.parked_on == ParkedOn.OVERRIDE and step.now < arrival.closes_at
    reason = BatchCloseReason.RUN_NOW if early else BatchCloseReason.WINDOW
    if not early and arrival.status == BatchStatus.OPEN and "schedule" in step.config:
        # The first opener due closes the node's others due with it (a scheduled digest's
        # batches come due together); the next openers find theirs closed already.
        batches.close_due(
            workflow_id=step.instance.workflow_id, node_id=step.node_id, now=step.now, actor=ACTOR
        )
    batch = batches.close(batch_id=arrival.batch_id, now=step.now, actor=ACTOR, reason=reason)
    return NodeResult(output=batches.digest(batch), vars_key=NODE.vars_key(step.node_id))


def _park_opener(step: StepContext, arrival: batches.Arrival) -> NodeResult:
    return NodeResult(
        output={
            "batch_id": str(arrival.batch_id),
            "opened_at": arrival.opened_at.isoformat(),
            "closes_at": arrival.closes_at.isoformat(),
        },
        park_until=arrival.closes_at,
        park_on=ParkedOn.BATCH,
        after_commit=_after_park(step, arrival),
    )


def _after_park(step: StepContext, arrival: batches.Arrival) -> partial[None]:
    """Once parked: a batch closed meanwhile completes or wakes the instance now."""
    return partial(batches.after_park, instance_id=step.instance_id, batch_id=str(arrival.batch_id))


def _joined(arrival: batches.Arrival) -> dict[str, Any]:
    return {"batch_id": str(arrival.batch_id), "joined": True}


def _park_member(step: StepContext, arrival: batches.Arrival, *, joined_now: bool) -> NodeResult:
    """Park in the batch until its window ends plus a lease. Joining is the node's
    outcome (skipped, ``batched``: logged and counted once); parking again after an
    early wake is not."""
    grace = timedelta(seconds=settings.NOTIFYFLOW_LEASE_S)
    until: datetime = max(arrival.closes_at, step.now) + grace
    return NodeResult(
        output=_joined(arrival),
        park_until=until,
        park_on=ParkedOn.BATCH,
        after_commit=_after_park(step, arrival),
        skip_reason="batched" if joined_now else "",
        vars_key=NODE.vars_key(step.node_id),
    )


def _member_ends(step: StepContext, arrival: batches.Arrival) -> NodeResult:
    return NodeResult(
        output=_joined(arrival),
        end=True,
        skip_reason="batched",
        vars_key=NODE.vars_key(step.node_id),
    )


MIN_ITEMS, MAX_ITEMS = 2, 10_000

NODE = node_types.register(
    NodeType(
        name="batch",
        description="Collect the instances reaching the node per recipient and key for a "
        "window, or until a cron schedule's next time: the first continues when it closes "
        "with `vars.batch_<node id>` = {batch_id, count, items, first, last, opened_at, "
        "closed_at}; the others end, skipped `batched`.",
        fields={
            "window": FieldSpec(
                False,
                "window",
                'How long a batch stays open after its first arrival ("1m", "1h", "PT10M"; '
                "more than 0).",
            ),
            "schedule": FieldSpec(
                False,
                "schedule",
                "Instead of window: {cron, timezone?}. The batch closes at the next time the "
                'five-field cron expression names ("0 9 * * 1-5": 09:00 on weekdays) after '
                "its first arrival, in timezone (an IANA name), else the recipient's, else "
                "UTC.",
            ),
            "key": FieldSpec(
                False,
                "template",
                'Batch key (template, default ""): one open batch per workflow, node, '
                "recipient and rendered key (at most 255 characters).",
            ),
            "max_items": FieldSpec(
                False,
                "integer",
                f"Close the batch at once when it holds this many items ({MIN_ITEMS}-{MAX_ITEMS}).",
                minimum=MIN_ITEMS,
                maximum=MAX_ITEMS,
            ),
        },
        run=execute,
        preview=preview,
        exactly_one_of=ExactlyOneOf(("window", "schedule"), code="invalid_batch"),
    )
)
