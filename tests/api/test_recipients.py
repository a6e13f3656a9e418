"""Recipients over HTTP: PUT creates or replaces, PATCH merges, GET, search,
bulk with one outcome per item, addresses validated at the edge, scopes."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from api_keys.services import api_key_create
from recipients.models import Recipient
from tests.factories import RecipientFactory

pytestmark = pytest.mark.django_db


def client(scope: str) -> APIClient:
    raw = api_key_create(name=f"{scope}-key", scope=scope)[1]
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return api


def url(recipient_id: str) -> str:
    return f"/api/v1/recipients/{recipient_id}/"


def test_put_creates_then_replaces_leaving_out_fields_null(api):
    body = {
        "email": "ada@example.com",
        "phone": "+44 20 7946 0958",
        "timezone": "Europe/London",
        "locale": "en-GB",
        "properties": {"plan": "pro"},
    }
    created = api.put(url("u1"), body, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["phone"] == "+442079460958"
    assert created.json()["properties"] == {"plan": "pro"}

    replaced = api.put(url("u1"), {"email": "ada@example.org"}, format="json")
    assert replaced.status_code == 200
    data = replaced.json()
    assert data["email"] == "ada@example.org"
    assert (data["phone"], data["timezone"], data["locale"], data["properties"]) == (
        None,
        None,
        None,
        {},
    )


def test_put_keeps_the_preferences(api):
    RecipientFactory(id="u1", preferences={"channels": {"sms": False}})
    assert api.put(url("u1"), {}, format="json").status_code == 200
    assert Recipient.objects.get(pk="u1").preferences == {"channels": {"sms": False}}


def test_patch_merges_and_an_explicit_null_clears(api):
    RecipientFactory(id="u1", email="a@example.com", phone="+15550000001", locale="en")
    response = api.patch(url("u1"), {"locale": "fr", "phone": None}, format="json")
    assert response.status_code == 200, response.content
    row = Recipient.objects.get(pk="u1")
    assert (row.email, row.phone, row.locale) == ("a@example.com", None, "fr")


def test_patch_of_an_unknown_recipient_is_404_and_creates_nothing(api):
    response = api.patch(url("nobody"), {"locale": "fr"}, format="json")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"
    assert not Recipient.objects.exists()


def test_get_answers_the_recipient_and_404_for_an_unknown_one(api):
    RecipientFactory(id="u1", email="a@example.com")
    assert api.get(url("u1")).json()["email"] == "a@example.com"
    assert api.get(url("u2")).status_code == 404


@pytest.mark.parametrize(
    ("body", "field", "code"),
    [
        ({"phone": "555-1234"}, "phone", "invalid_phone"),
        ({"phone": "+0123"}, "phone", "invalid_phone"),
        ({"timezone": "Mars/Olympus"}, "timezone", "invalid_timezone"),
        ({"email": "not-an-address"}, "email", "invalid_email"),
        ({"properties": [1]}, "properties", "not_an_object"),
        ({"nickname": "x"}, "nickname", "unknown_field"),
    ],
)
def test_bad_fields_are_400_naming_the_field_and_write_nothing(api, body, field, code):
    response = api.put(url("u1"), body, format="json")
    assert response.status_code == 400, response.content
    assert (response.json()["field"], response.json()["code"]) == (field, code)
    assert not Recipient.objects.exists()


def test_an_id_over_255_characters_is_refused(api):
    response = api.put(url("x" * 256), {}, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "too_long"


def test_search_matches_id_email_and_phone_prefixes_and_pages(api):
    RecipientFactory(id="alice", email="Alice@Example.com", phone="+15550000001")
    RecipientFactory(id="bob", email="bob@example.com", phone="+15550000002")
    RecipientFactory(id="carol", email="carol@example.org", phone="+4420000000")

    def ids(query: str) -> list[str]:
        response = api.get(f"/api/v1/recipients/{query}")
        assert response.status_code == 200, response.content
        return [r["id"] for r in response.json()["results"]]

    assert ids("") == ["alice", "bob", "carol"]
    assert ids("?search=bo") == ["bob"]
    assert ids("?search=alice@example.com") == ["alice"]
    assert ids("?search=%2B1555") == ["alice", "bob"]
    assert ids("?search=%2B1%20555%20000%200002") == ["bob"]
    first = api.get("/api/v1/recipients/?page_size=2").json()
    assert [r["id"] for r in first["results"]] == ["alice", "bob"]
    assert [r["id"] for r in api.get(first["next"]).json()["results"]] == ["carol"]


def test_bulk_answers_one_outcome_per_item_and_writes_only_the_valid_ones(api):
    RecipientFactory(id="known", email="k@example.com", locale="en")
    response = api.post(
        "/api/v1/recipients/bulk/",
        {
            "items": [
                {"id": "new", "email": "n@example.com"},
                {"id": "known", "locale": "de"},
                {"id": "bad", "phone": "12"},
                "not an object",
            ]
        },
        format="json",
    )
    assert response.status_code == 200, response.content
    results = response.json()["results"]
    assert [(r["index"], r["status"], r.get("id")) for r in results] == [
        (0, "created", "new"),
        (1, "updated", "known"),
        (2, "invalid", None),
        (3, "invalid", None),
    ]
    assert (results[2]["error"]["field"], results[2]["error"]["code"]) == ("phone", "invalid_phone")
    assert set(Recipient.objects.values_list("pk", flat=True)) == {"known", "new"}
    known = Recipient.objects.get(pk="known")
    assert (known.email, known.locale) == ("k@example.com", "de")


def test_bulk_over_1000_items_is_400_and_writes_nothing(api):
    items = [{"id": f"u{n}"} for n in range(1001)]
    response = api.post("/api/v1/recipients/bulk/", {"items": items}, format="json")
    assert response.status_code == 400
    assert (response.json()["field"], response.json()["code"]) == ("items", "too_many_items")
    assert not Recipient.objects.exists()


@pytest.mark.postgres  # SQLite splits statements at 999 parameters
def test_bulk_of_1000_items_is_set_based(api, django_assert_max_num_queries):
    items = [{"id": f"u{n:04d}", "email": f"u{n}@example.com"} for n in range(1000)]
    with django_assert_max_num_queries(12):
        response = api.post("/api/v1/recipients/bulk/", {"items": items}, format="json")
    assert response.status_code == 200
    assert Recipient.objects.count() == 1000


def test_scopes_read_reads_trigger_writes_admin_erases():
    RecipientFactory(id="u1")
    reader, writer = client("read"), client("trigger")
    assert reader.get(url("u1")).status_code == 200
    assert reader.put(url("u2"), {}, format="json").status_code == 403
    assert reader.patch(url("u1"), {}, format="json").status_code == 403
    assert reader.post("/api/v1/recipients/bulk/", {"items": []}, format="json").status_code == 403
    assert writer.put(url("u2"), {}, format="json").status_code == 201
    assert writer.get(url("u1")).status_code == 403
    refused = writer.delete(url("u1"))
    assert refused.status_code == 403
    assert refused.json()["code"] == "permission_denied"
    assert reader.delete(url("u1")).status_code == 403
    assert Recipient.objects.filter(pk="u1").exists()
    assert client("admin").delete(url("u1")).status_code == 204
    assert not Recipient.objects.filter(pk="u1").exists()


def test_delete_of_an_unknown_recipient_is_404(api):
    assert api.delete(url("nobody")).status_code == 404
