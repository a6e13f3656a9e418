"""The lean check of a bulk item (``_PlainItem``) against the path it shortcuts
(``BulkItemsField._item``: storable values, then TriggerCreateInputSerializer): the
same ``TriggerItem`` for every plain item, and every other item left to that path."""

from __future__ import annotations

import pytest

from api.serializers.triggers import WORKFLOW_KEY_MAX_LENGTH, BulkItemsField, _PlainItem
from triggers.services import MAX_IDEMPOTENCY_KEY_LENGTH, TriggerItem

LIMIT = 1024


def _item(**changes):
    return {"workflow": "wf", "idempotency_key": "key-1", "payload": {"a": 1}, **changes}


# Items the lean check must take itself, with the serializer's result.
PLAIN = [
    _item(),
    _item(payload={}),
    _item(payload={"name": "Zoë", "nested": {"list": [1, 2.5, None, True, "x"]}}),
    _item(workflow="w" * 100, idempotency_key="k" * 255),
    _item(idempotency_key=" spaced key "),
    _item(payload={"s": "x" * (LIMIT - 8)}),  # {"s":"..."} is exactly the limit
]

# Items it may leave to the serializer although they are valid (false alarms).
MAYBE = [
    _item(payload={"emoji": "\U0001f600"}),  # a valid surrogate pair once escaped
    _item(payload={"word": "NaN"}),
]

# Valid items of another shape: always the serializer's.
OTHER_SHAPES = [
    _item(recipients=["r1"]),
    {"workflow": "wf", "idempotency_key": "no-payload"},
]

# Items the serializer refuses: the lean check must leave every one to it.
REFUSED = [
    "not an object",
    {"workflow": "wf", "payload": {}},
    _item(extra=1),
    _item(workflow=12),
    _item(workflow=""),
    _item(workflow="   "),
    _item(workflow="w" * 101),
    _item(idempotency_key="k" * 256),
    _item(idempotency_key=None),
    _item(idempotency_key="a\x00b"),
    _item(workflow="\ud800"),
    # Ids and keys are printable (issue 39): control and bidi characters.
    _item(idempotency_key="a\nb"),
    _item(idempotency_key="a\x85b"),
    _item(idempotency_key="order-\u202e1"),
    _item(workflow="wf\t"),
    _item(payload=[1, 2]),
    _item(payload=None),
    _item(payload={"n": float("nan")}),
    _item(payload={"n": float("inf")}),
    _item(payload={"s": "a\x00b"}),
    _item(payload={"k\x00": 1}),
    _item(payload={"s": "lone \udc00"}),
    _item(payload={"s": "x" * (LIMIT - 7)}),  # one byte over
    _item(payload={"s": "é" * (LIMIT // 6)}),  # within the limit in UTF-8, not escaped
]


@pytest.fixture
def checks(settings):
    settings.NOTIFYFLOW_MAX_PAYLOAD_BYTES = LIMIT
    field = BulkItemsField()
    fields = field.child.fields
    # The serializer's own limits: the lean check's constants must be the same.
    lean = _PlainItem(
        workflow_max=fields["workflow"].max_length,
        key_max=fields["idempotency_key"].max_length,
        payload_max=LIMIT,
    )
    assert (lean.workflow_max, lean.key_max) == (
        WORKFLOW_KEY_MAX_LENGTH,
        MAX_IDEMPOTENCY_KEY_LENGTH,
    )
    return field, lean


@pytest.mark.parametrize("raw", PLAIN)
def test_a_plain_item_is_the_item_the_serializer_makes(checks, raw):
    field, lean = checks
    slow = field._item(raw)
    assert isinstance(slow, TriggerItem)
    assert lean.item(raw) == slow


@pytest.mark.parametrize("raw", MAYBE)
def test_a_false_alarm_is_left_to_the_serializer_which_accepts_it(checks, raw):
    field, lean = checks
    assert lean.item(raw) in (None, field._item(raw))
    assert isinstance(field._item(raw), TriggerItem)


@pytest.mark.parametrize("raw", OTHER_SHAPES)
def test_an_item_of_another_shape_is_left_to_the_serializer(checks, raw):
    field, lean = checks
    assert isinstance(field._item(raw), TriggerItem)
    assert lean.item(raw) is None


@pytest.mark.parametrize("raw", REFUSED)
def test_an_item_the_serializer_refuses_is_left_to_it(checks, raw):
    field, lean = checks
    assert not isinstance(field._item(raw), TriggerItem)
    assert lean.item(raw) is None


def test_the_field_answers_each_item_as_the_serializer_path_would(checks):
    field, _ = checks
    items = [*PLAIN, *MAYBE, *OTHER_SHAPES, *REFUSED]
    got = field.to_internal_value(items)
    expected = [field._item(raw) for raw in items]
    assert len(got) == len(expected)
    for mine, theirs in zip(got, expected, strict=True):
        if isinstance(theirs, TriggerItem):
            assert mine == theirs
        else:
            assert (mine.code, mine.field, str(mine)) == (theirs.code, theirs.field, str(theirs))
