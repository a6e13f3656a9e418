"""The recipient-facing feed API: tokens minted with an API key, the feed read
and changed with a token only (a key cannot read a feed, a token opens nothing else),
cursor pages with filters, idempotent actions, bulk, counts with ETag and 304 in one
primary-key read, CORS for a browser on another origin."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from api_keys.services import api_key_create
from feed.models import FeedItem
from feed.tokens import feed_token_create
from tests.factories import RecipientFactory
from tests.factories import feed_items as make_items

pytestmark = pytest.mark.django_db


def _token(person, now=None) -> str:
    return feed_token_create(recipient_id=person.pk, now=now or timezone.now()).token


def _client(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


@pytest.fixture
def person():
    return RecipientFactory()


@pytest.fixture
def feed(person):
    return _client(_token(person))


# --- tokens ----------------------------------------------------------------------------


def test_a_trigger_key_mints_a_token_that_opens_the_feed(person):
    raw = api_key_create(name="backend", scope="trigger")[1]
    backend = _client(raw)
    answer = backend.post(f"/api/v1/recipients/{person.pk}/feed-token/")
    assert answer.status_code == 200, answer.json()
    body = answer.json()
    assert set(body) == {"token", "expires_at"}
    assert body["token"].startswith("nfr_")
    assert _client(body["token"]).get("/api/v1/feed/").status_code == 200


def test_the_token_lives_as_long_as_the_setting_says(person, api, settings):
    settings.NOTIFYFLOW_FEED_TOKEN_TTL_S = 120
    before = timezone.now()
    body = api.post(f"/api/v1/recipients/{person.pk}/feed-token/").json()
    expires = timezone.datetime.fromisoformat(body["expires_at"])
    assert timedelta(seconds=118) <= expires - before <= timedelta(seconds=121)


def test_a_read_key_may_not_mint_a_token(person):
    reader = _client(api_key_create(name="reader", scope="read")[1])
    answer = reader.post(f"/api/v1/recipients/{person.pk}/feed-token/")
    assert answer.status_code == 403
    assert answer.json()["code"] == "permission_denied"


def test_no_token_for_an_unknown_recipient(api):
    assert api.post("/api/v1/recipients/nobody/feed-token/").status_code == 404


def test_an_expired_token_is_401_token_expired(person):
    stale = _token(person, now=timezone.now() - timedelta(hours=2))
    answer = _client(stale).get("/api/v1/feed/counts/")
    assert answer.status_code == 401
    assert answer.json()["code"] == "token_expired"


def test_a_forged_token_is_401_invalid_token(person):
    token = _token(person)
    forged = token[:-3] + ("AAA" if not token.endswith("AAA") else "BBB")
    answer = _client(forged).get("/api/v1/feed/")
    assert answer.status_code == 401
    assert (answer.json()["code"], answer.json()["field"]) == ("invalid_token", "Authorization")


def test_a_token_made_with_another_secret_is_refused(person, settings):
    token = _token(person)
    settings.SECRET_KEY = "another secret key entirely, for this test only"
    assert _client(token).get("/api/v1/feed/").json()["code"] == "invalid_token"


def test_an_api_key_cannot_read_a_feed(api):
    answer = api.get("/api/v1/feed/")
    assert answer.status_code == 401
    assert answer.json()["code"] == "recipient_token_required"
    assert api.get("/api/v1/feed/counts/").status_code == 401


def test_no_credentials_on_the_feed_is_401():
    answer = APIClient().get("/api/v1/feed/counts/")
    assert answer.status_code == 401
    assert answer.json()["code"] == "not_authenticated"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/api/v1/triggers/"),
        ("get", "/api/v1/recipients/{id}/"),
        ("post", "/api/v1/recipients/{id}/feed-token/"),
        ("get", "/api/v1/recipients/{id}/preferences/"),
        ("get", "/api/v1/workflows/"),
    ],
)
def test_a_recipient_token_opens_nothing_but_the_feed(person, feed, method, path):
    answer = getattr(feed, method)(path.format(id=person.pk))
    assert answer.status_code == 401
    assert "feed endpoints" in answer.json()["message"]


def _refused(answer) -> str:
    assert answer.status_code == 401, answer.content
    return answer.json()["code"]


FEED_PATHS = ("/api/v1/feed/", "/api/v1/feed/counts/")


def test_an_erased_recipient_s_tokens_are_refused_and_a_new_one_inherits_none(person, feed, api):
    make_items(person, 2)
    assert api.delete(f"/api/v1/recipients/{person.pk}/").status_code == 204
    for path in FEED_PATHS:
        assert _refused(feed.get(path)) == "token_revoked"
    # A new person under the same id, with a feed of their own: the old token (within
    # its hour) reads none of it; their own token does.
    again = RecipientFactory(id=person.pk, email="someone.else@example.com")
    make_items(again, 1)
    for path in FEED_PATHS:
        assert _refused(feed.get(path)) == "token_revoked"
    assert _refused(feed.post("/api/v1/feed/bulk/", {"action": "read", "ids": "all"})) == (
        "token_revoked"
    )
    fresh = _client(_token(again))
    assert len(fresh.get("/api/v1/feed/").json()["results"]) == 1
    assert fresh.get("/api/v1/feed/counts/").json()["unread_count"] == 1


def test_revoking_refuses_every_token_minted_so_far_and_no_later_one(person, feed, api):
    make_items(person, 1)
    other = _client(_token(person))
    bystander = RecipientFactory()
    theirs = _client(_token(bystander))
    answer = api.post(f"/api/v1/recipients/{person.pk}/feed-token/revoke/")
    assert answer.status_code == 204, answer.content
    for client in (feed, other):
        for path in FEED_PATHS:
            assert _refused(client.get(path)) == "token_revoked"
        item = FeedItem.objects.filter(recipient=person).first()
        assert _refused(client.post(f"/api/v1/feed/{item.pk}/read/")) == "token_revoked"
    assert theirs.get("/api/v1/feed/counts/").status_code == 200
    minted = api.post(f"/api/v1/recipients/{person.pk}/feed-token/").json()["token"]
    assert _client(minted).get("/api/v1/feed/counts/").json()["unread_count"] == 1


def test_revoking_needs_a_trigger_key_and_a_known_recipient(person, api):
    reader = _client(api_key_create(name="reader", scope="read")[1])
    answer = reader.post(f"/api/v1/recipients/{person.pk}/feed-token/revoke/")
    assert answer.status_code == 403
    trigger = _client(api_key_create(name="backend", scope="trigger")[1])
    assert trigger.post(f"/api/v1/recipients/{person.pk}/feed-token/revoke/").status_code == 204
    assert api.post("/api/v1/recipients/nobody/feed-token/revoke/").status_code == 404


# --- the list -------------------------------------------------------------------------


def test_the_feed_is_newest_first_with_its_counts(person, feed):
    items = make_items(person, 3)
    body = feed.get("/api/v1/feed/").json()
    assert set(body) == {"results", "next", "unread_count", "unseen_count"}
    assert [r["id"] for r in body["results"]] == [str(i.pk) for i in reversed(items)]
    assert (body["unread_count"], body["unseen_count"], body["next"]) == (3, 3, None)
    first = body["results"][-1]
    assert first["title"] == "Item 0" and first["data"] == {"n": 0}
    assert first["recipient"] == person.pk
    assert first["workflow"] == items[0].workflow.key
    assert (first["seen_at"], first["read_at"], first["archived_at"]) == (None, None, None)


def test_cursor_pages_cover_the_feed_once(person, feed):
    items = make_items(person, 5)
    seen, url = [], "/api/v1/feed/?page_size=2"
    while url:
        body = feed.get(url).json()
        seen += [r["id"] for r in body["results"]]
        url = body["next"]
    assert seen == [str(i.pk) for i in reversed(items)]


def test_a_bad_cursor_is_400_invalid_cursor(feed):
    answer = feed.get("/api/v1/feed/?cursor=not-a-cursor")
    assert answer.status_code == 400
    assert (answer.json()["code"], answer.json()["field"]) == ("invalid_cursor", "cursor")


def test_filters_status_and_archived(person, feed):
    read, archived, fresh = make_items(person, 3)
    feed.post(f"/api/v1/feed/{read.pk}/read/")
    feed.post(f"/api/v1/feed/{archived.pk}/archive/")

    def ids(query: str) -> set[str]:
        return {r["id"] for r in feed.get(f"/api/v1/feed/{query}").json()["results"]}

    assert ids("") == {str(read.pk), str(fresh.pk)}
    assert ids("?status=unread") == {str(fresh.pk)}
    assert ids("?archived=only") == {str(archived.pk)}
    assert ids("?archived=include&status=unseen") == {str(i.pk) for i in (read, archived, fresh)}
    assert feed.get("/api/v1/feed/?status=new").json()["code"] == "invalid_choice"


def test_a_token_lists_only_its_own_recipient_s_items(person, feed):
    make_items(RecipientFactory(), 2)
    (mine,) = make_items(person, 1)
    assert [r["id"] for r in feed.get("/api/v1/feed/").json()["results"]] == [str(mine.pk)]


# --- actions --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "field"), [("seen", "seen_at"), ("read", "read_at"), ("archive", "archived_at")]
)
def test_an_action_returns_the_item_and_is_idempotent(person, feed, action, field):
    (item,) = make_items(person, 1)
    first = feed.post(f"/api/v1/feed/{item.pk}/{action}/")
    assert first.status_code == 200, first.json()
    assert first.json()[field] is not None
    again = feed.post(f"/api/v1/feed/{item.pk}/{action}/").json()
    assert again[field] == first.json()[field]


def test_unread_and_unarchive_undo(person, feed):
    (item,) = make_items(person, 1)
    feed.post(f"/api/v1/feed/{item.pk}/read/")
    feed.post(f"/api/v1/feed/{item.pk}/archive/")
    assert feed.post(f"/api/v1/feed/{item.pk}/unread/").json()["read_at"] is None
    assert feed.post(f"/api/v1/feed/{item.pk}/unarchive/").json()["archived_at"] is None
    assert feed.get("/api/v1/feed/counts/").json() == {"unread_count": 1, "unseen_count": 1}


def test_another_recipient_s_item_is_404_and_unchanged(feed):
    (theirs,) = make_items(RecipientFactory(), 1)
    answer = feed.post(f"/api/v1/feed/{theirs.pk}/read/")
    assert answer.status_code == 404
    assert answer.json()["code"] == "not_found"
    assert FeedItem.objects.get(pk=theirs.pk).read_at is None


def test_an_action_takes_no_body(person, feed):
    (item,) = make_items(person, 1)
    answer = feed.post(f"/api/v1/feed/{item.pk}/read/", {"at": "now"}, format="json")
    assert (answer.status_code, answer.json()["code"]) == (400, "unknown_field")


def test_bulk_by_ids_and_all(person, feed):
    items = make_items(person, 4)
    answer = feed.post(
        "/api/v1/feed/bulk/",
        {"action": "read", "ids": [str(items[0].pk), str(items[1].pk)]},
        format="json",
    )
    assert answer.json() == {"changed": 2, "unread_count": 2, "unseen_count": 4}
    answer = feed.post("/api/v1/feed/bulk/", {"action": "seen", "ids": "all"}, format="json")
    assert answer.json() == {"changed": 4, "unread_count": 2, "unseen_count": 0}


@pytest.mark.parametrize(
    ("body", "field", "code"),
    [
        ({"action": "delete", "ids": "all"}, "action", "invalid_choice"),
        ({"action": "read", "ids": "some"}, "ids", "invalid"),
        ({"action": "read", "ids": ["not-a-uuid"]}, "ids[0]", "invalid"),
        # DRF's UUIDField would take an integer as a UUID (issue 39): an id is a string.
        ({"action": "read", "ids": [12]}, "ids[0]", "invalid"),
        (
            {"action": "read", "ids": ["01890a5d-ac96-774b-bcce-b302099a8057", 12]},
            "ids[1]",
            "invalid",
        ),
        ({"action": "read"}, "ids", "required"),
        ({"action": "read", "ids": "all", "extra": 1}, "extra", "unknown_field"),
    ],
)
def test_a_bad_bulk_body_is_400_naming_the_field(feed, body, field, code):
    answer = feed.post("/api/v1/feed/bulk/", body, format="json")
    assert answer.status_code == 400
    assert (answer.json()["field"], answer.json()["code"]) == (field, code)


# --- counts ---------------------------------------------------------------------------


def test_counts_carry_an_etag_and_answer_304_while_it_holds(person, feed):
    items = make_items(person, 2)
    first = feed.get("/api/v1/feed/counts/")
    assert first.json() == {"unread_count": 2, "unseen_count": 2}
    etag = first["ETag"]
    assert etag.startswith('"') and etag.endswith('"')
    unchanged = feed.get("/api/v1/feed/counts/", HTTP_IF_NONE_MATCH=etag)
    assert unchanged.status_code == 304
    assert unchanged.content == b""
    assert unchanged["ETag"] == etag
    assert feed.get("/api/v1/feed/counts/", HTTP_IF_NONE_MATCH=f'W/{etag}, "x"').status_code == 304
    feed.post(f"/api/v1/feed/{items[0].pk}/read/")
    changed = feed.get("/api/v1/feed/counts/", HTTP_IF_NONE_MATCH=etag)
    assert changed.status_code == 200
    assert changed.json() == {"unread_count": 1, "unseen_count": 2}
    assert changed["ETag"] != etag


def test_counts_are_one_primary_key_read(person, feed):
    make_items(person, 3)
    with CaptureQueriesContext(connection) as queries:
        assert feed.get("/api/v1/feed/counts/").status_code == 200
    assert len(queries) == 1
    assert "count(" not in queries[0]["sql"].lower()


# --- CORS -----------------------------------------------------------------------------


def test_a_preflight_is_answered_without_credentials():
    answer = APIClient().options(
        "/api/v1/feed/counts/",
        HTTP_ORIGIN="https://app.example.com",
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="GET",
        HTTP_ACCESS_CONTROL_REQUEST_HEADERS="authorization, if-none-match",
    )
    assert answer.status_code == 204
    assert answer["Access-Control-Allow-Origin"] == "*"
    allowed = answer["Access-Control-Allow-Headers"].lower()
    assert "authorization" in allowed and "if-none-match" in allowed
    assert "POST" in answer["Access-Control-Allow-Methods"]


def test_feed_answers_errors_included_carry_cors_headers(person, feed):
    ok = feed.get("/api/v1/feed/counts/", HTTP_ORIGIN="null")
    assert ok["Access-Control-Allow-Origin"] == "*"
    assert "ETag" in ok["Access-Control-Expose-Headers"]
    refused = APIClient().get("/api/v1/feed/", HTTP_ORIGIN="https://app.example.com")
    assert refused.status_code == 401
    assert refused["Access-Control-Allow-Origin"] == "*"


def test_the_rest_of_the_api_has_no_cors_headers(api):
    answer = api.get("/api/v1/workflows/", HTTP_ORIGIN="https://app.example.com")
    assert "Access-Control-Allow-Origin" not in answer
