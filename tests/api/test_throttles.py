"""GET and DELETE /api/v1/throttles/: the counters with their count in the
window, a key's reset, the parameters' errors and the keys' scopes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from api_keys.services import api_key_create
from gates.models import ThrottleCounter
from gates.throttles import epoch_ms
from tests.factories import ThrottleCounterFactory

pytestmark = pytest.mark.django_db
URL = "/api/v1/throttles/"


def client_for(scope: str, workflows: list[str] | None = None) -> APIClient:
    raw = api_key_create(name=f"{scope}-key", scope=scope, workflows=workflows or ())[1]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


@pytest.fixture
def counters():
    now = timezone.now()
    full = ThrottleCounterFactory(
        subject="shop:gate",
        key="promo",
        hits=[epoch_ms(now - timedelta(hours=3)), epoch_ms(now - timedelta(minutes=40))]
        + [epoch_ms(now - timedelta(minutes=20))],
        limit=2,
        window_ms=3_600_000,
    )
    other_node = ThrottleCounterFactory(subject="shop:other", key="promo")
    ada = ThrottleCounterFactory(
        scope="recipient",
        subject="ada",
        key="promo",
        hits=[epoch_ms(now)],
        limit=2,
        window_ms=86_400_000,
    )
    empty_key = ThrottleCounterFactory(scope="recipient", subject="bob", key="")
    return {"full": full, "other": other_node, "ada": ada, "empty": empty_key}


def test_the_list_shows_each_counter_with_its_count_in_the_window(api, counters):
    response = api.get(URL, {"scope": "workflow", "workflow": "shop", "node": "gate"})
    assert response.status_code == 200, response.json()
    [row] = response.json()["results"]
    assert row["scope"] == "workflow" and row["subject"] == "shop:gate"
    assert (row["workflow"], row["node"], row["recipient"]) == ("shop", "gate", None)
    assert (row["key"], row["count"], row["limit"], row["window_ms"]) == (
        "promo",
        2,
        2,
        3_600_000,
    )
    assert row["oldest_hit"] is not None and row["next_room_at"] > row["oldest_hit"]
    by_key = api.get(URL, {"key": "promo"}).json()["results"]
    assert [r["subject"] for r in by_key] == ["shop:gate", "shop:other", "ada"]
    person = api.get(URL, {"scope": "recipient", "recipient": "ada"}).json()["results"]
    assert [(r["recipient"], r["count"], r["workflow"]) for r in person] == [("ada", 1, None)]
    empty = api.get(URL + "?key=").json()["results"]
    assert [r["subject"] for r in empty] == ["bob"]


def test_delete_resets_a_key(api, counters):
    response = api.delete(URL + "?scope=workflow&key=promo&workflow=shop&node=gate")
    assert response.status_code == 200, response.json()
    assert response.json() == {"reset": 1}
    assert not ThrottleCounter.objects.filter(pk=counters["full"].pk).exists()
    assert api.delete(URL + "?scope=workflow&key=promo&workflow=shop").json() == {"reset": 1}
    assert api.delete(URL + "?scope=recipient&key=promo&recipient=ada").json() == {"reset": 1}
    assert api.delete(URL + "?scope=recipient&key=promo").json() == {"reset": 0}
    # key= alone: the empty key (a node without one).
    assert api.delete(URL + "?scope=recipient&key=").json() == {"reset": 1}
    assert not ThrottleCounter.objects.exists()


@pytest.mark.parametrize(
    ("query", "field", "code"),
    [
        ("?key=promo", "scope", "required"),
        ("?scope=team&key=promo", "scope", "invalid_choice"),
        ("?scope=workflow", "key", "required"),
        ("?scope=recipient&key=promo&workflow=shop", "workflow", "scope_mismatch"),
        ("?scope=workflow&key=promo&recipient=ada", "recipient", "scope_mismatch"),
        ("?scope=workflow&key=promo&colour=red", "colour", "unknown_parameter"),
    ],
)
def test_delete_refuses_bad_parameters_naming_the_field(api, counters, query, field, code):
    response = api.delete(URL + query)
    assert response.status_code == 400
    body = response.json()
    assert (body["field"], body["code"]) == (field, code), body
    assert ThrottleCounter.objects.count() == 4


def test_reading_needs_read_and_resetting_needs_admin(counters):
    reader = client_for("read")
    assert reader.get(URL).status_code == 200
    refused = reader.delete(URL + "?scope=workflow&key=promo")
    assert refused.status_code == 403 and refused.json()["code"] == "permission_denied"
    assert client_for("trigger").get(URL).status_code == 403
    assert ThrottleCounter.objects.count() == 4


def test_a_key_limited_to_workflows_reaches_only_their_counters(counters):
    limited = client_for("admin", workflows=["shop"])
    assert limited.get(URL).status_code == 403
    assert limited.get(URL, {"scope": "recipient"}).status_code == 403
    assert limited.delete(URL + "?scope=workflow&key=promo&workflow=blog").status_code == 403
    rows = limited.get(URL, {"scope": "workflow", "workflow": "shop"}).json()["results"]
    assert [r["subject"] for r in rows] == ["shop:gate", "shop:other"]
    reset = limited.delete(URL + "?scope=workflow&key=promo&workflow=shop")
    assert reset.json() == {"reset": 2}
