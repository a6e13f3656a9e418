"""Lists (topics) over HTTP: PUT a list, add and remove members set-based
(unknown ids created empty), page through members, member counts, scopes."""

from __future__ import annotations

import pytest

from recipients.models import ListMembership, Recipient
from tests.api.test_recipients import client
from tests.factories import RecipientFactory, RecipientListFactory

pytestmark = pytest.mark.django_db

MEMBERS = "/api/v1/lists/{}/members/"


def test_put_creates_then_renames_a_list(api):
    created = api.put("/api/v1/lists/newsletter/", {"name": "Newsletter"}, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["key"] == "newsletter"
    renamed = api.put("/api/v1/lists/newsletter/", {"name": "Weekly"}, format="json")
    assert renamed.status_code == 200
    assert api.get("/api/v1/lists/newsletter/").json()["name"] == "Weekly"


def test_adding_members_creates_unknown_recipients_empty_and_is_idempotent(api):
    RecipientListFactory(key="beta")
    RecipientFactory(id="known", email="k@example.com")
    body = {"recipients": ["known", "fresh", "fresh"]}
    first = api.post(MEMBERS.format("beta"), body, format="json")
    assert first.status_code == 200, first.content
    assert first.json() == {"added": 2, "created": 1}
    fresh = Recipient.objects.get(pk="fresh")
    assert (fresh.email, fresh.phone, fresh.properties) == (None, None, {})
    assert Recipient.objects.get(pk="known").email == "k@example.com"
    again = api.post(MEMBERS.format("beta"), body, format="json")
    assert again.json() == {"added": 0, "created": 0}
    assert ListMembership.objects.filter(list__key="beta").count() == 2


def test_removing_members_keeps_the_recipients(api):
    recipient_list = RecipientListFactory(key="beta")
    for recipient in RecipientFactory.create_batch(3):
        ListMembership.objects.create(list=recipient_list, recipient=recipient)
    ids = sorted(Recipient.objects.values_list("pk", flat=True))
    response = api.delete(MEMBERS.format("beta"), {"recipients": [ids[0], "nobody"]}, format="json")
    assert response.status_code == 200, response.content
    assert response.json() == {"removed": 1}
    assert Recipient.objects.count() == 3
    listed = api.get(MEMBERS.format("beta")).json()["results"]
    assert [r["id"] for r in listed] == ids[1:]


def test_members_are_paged_by_id(api):
    recipient_list = RecipientListFactory(key="big")
    ids = [f"m{n:02d}" for n in range(5)]
    api.post(MEMBERS.format("big"), {"recipients": ids[::-1]}, format="json")
    page = api.get(MEMBERS.format("big") + "?page_size=3").json()
    assert [r["id"] for r in page["results"]] == ids[:3]
    assert [r["id"] for r in api.get(page["next"]).json()["results"]] == ids[3:]
    assert recipient_list.memberships.count() == 5


def test_the_lists_answer_their_member_counts(api):
    full = RecipientListFactory(key="a-list")
    RecipientListFactory(key="b-list")
    for recipient in RecipientFactory.create_batch(2):
        ListMembership.objects.create(list=full, recipient=recipient)
    results = api.get("/api/v1/lists/").json()["results"]
    assert [(r["key"], r["member_count"]) for r in results] == [("a-list", 2), ("b-list", 0)]


def test_members_of_an_unknown_list_are_404_and_nothing_is_created(api):
    response = api.post(MEMBERS.format("nope"), {"recipients": ["u1"]}, format="json")
    assert response.status_code == 404
    assert not Recipient.objects.exists()
    assert api.get(MEMBERS.format("nope")).status_code == 404


@pytest.mark.parametrize(
    ("recipients", "code"),
    [
        ([f"u{n}" for n in range(1001)], "too_many_items"),
        ([], "min_length"),
        (["ok", ""], "required"),
        (["x" * 256], "too_long"),
        ("u1", "not_a_list"),
    ],
)
def test_bad_member_bodies_are_400_and_write_nothing(api, recipients, code):
    RecipientListFactory(key="beta")
    response = api.post(MEMBERS.format("beta"), {"recipients": recipients}, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["code"] == code
    assert response.json()["field"].startswith("recipients")
    assert not Recipient.objects.exists()


def test_a_read_key_reads_lists_and_a_trigger_key_writes_them():
    RecipientListFactory(key="beta")
    reader, writer = client("read"), client("trigger")
    assert reader.get("/api/v1/lists/").status_code == 200
    assert reader.get(MEMBERS.format("beta")).status_code == 200
    assert reader.put("/api/v1/lists/beta/", {"name": "x"}, format="json").status_code == 403
    body = {"recipients": ["u1"]}
    assert reader.post(MEMBERS.format("beta"), body, format="json").status_code == 403
    assert writer.put("/api/v1/lists/gamma/", {"name": "G"}, format="json").status_code == 201
    assert writer.post(MEMBERS.format("beta"), body, format="json").status_code == 200
    assert writer.delete(MEMBERS.format("beta"), body, format="json").status_code == 200
