"""The hand-built trigger representation matches what DRF's fields would produce."""

from __future__ import annotations

import pytest
from rest_framework import serializers

from api.serializers.triggers import TriggerOutputSerializer
from tests.factories import TriggerInstanceFactory

pytestmark = pytest.mark.django_db


def test_fast_representation_equals_drf_field_by_field():
    instance = TriggerInstanceFactory(vars={"email_a": {"message_id": "m"}}, last_error="x")
    fast = TriggerOutputSerializer(instance).data
    slow = serializers.ModelSerializer.to_representation(TriggerOutputSerializer(), instance)
    assert fast == dict(slow)
    assert list(fast) == TriggerOutputSerializer.Meta.fields
    assert fast["created_at"].endswith("Z") and fast["finished_at"] is None
