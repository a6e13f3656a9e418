"""Workflow-limited keys act only through their workflows (issue 39
item 2): every people endpoint - recipients (bulk included), preferences and evaluate,
feed tokens and their revocation, channel data, erasure, lists and their members -
answers a key limited to workflows 403 ``permission_denied`` whatever its scope, and
changes nothing;
a key not limited to workflows gets what its scope allows. Such a key still triggers its
workflows with inline recipients.

The matrix is every (method, route) mounted under ``recipients/`` and ``lists/`` - a
people endpoint added later fails ``test_the_matrix_covers_every_people_endpoint``
until it is listed here - × scope × limited or not."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from api_keys.services import api_key_create
from recipients.models import ChatConnection, ListMembership, PushDevice, Recipient, RecipientList
from tests.factories import PAYLOAD, WorkflowFactory
from triggers.models import TriggerInstance

pytestmark = pytest.mark.django_db

# Who has each access level (api.permissions).
LEVELS = {"read": {"read", "admin"}, "trigger": {"trigger", "admin"}, "admin": {"admin"}}
PERSON, LIST = "ada", "news"
DEVICE = "0190e5a0-0000-7000-8000-00000000d0e5"
CHANNEL_DATA = f"recipients/{PERSON}/channel-data"
EVALUATE = "?workflow=welcome&channel=email"

# (method, route pattern, path, body, level needed, status a key in scope gets)
ENDPOINTS: list[tuple[str, str, str, Any, str, int]] = [
    ("GET", "recipients/", "recipients/", None, "read", 200),
    ("POST", "recipients/bulk/", "recipients/bulk/", {"items": [{"id": "bob"}]}, "trigger", 200),
    ("GET", "recipients/<str:id>/", f"recipients/{PERSON}/", None, "read", 200),
    (
        "PUT",
        "recipients/<str:id>/",
        f"recipients/{PERSON}/",
        {"email": "ada@example.com"},
        "trigger",
        200,
    ),
    ("PATCH", "recipients/<str:id>/", f"recipients/{PERSON}/", {"locale": "fr"}, "trigger", 200),
    ("DELETE", "recipients/<str:id>/", f"recipients/{PERSON}/", None, "admin", 204),
    (
        "GET",
        "recipients/<str:id>/preferences/",
        f"recipients/{PERSON}/preferences/",
        None,
        "read",
        200,
    ),
    (
        "PUT",
        "recipients/<str:id>/preferences/",
        f"recipients/{PERSON}/preferences/",
        {"channels": {"sms": False}},
        "trigger",
        200,
    ),
    (
        "PATCH",
        "recipients/<str:id>/preferences/",
        f"recipients/{PERSON}/preferences/",
        {"channels": {"email": False}},
        "trigger",
        200,
    ),
    (
        "GET",
        "recipients/<str:id>/preferences/evaluate/",
        f"recipients/{PERSON}/preferences/evaluate/{EVALUATE}",
        None,
        "read",
        200,
    ),
    (
        "POST",
        "recipients/<str:id>/feed-token/",
        f"recipients/{PERSON}/feed-token/",
        None,
        "trigger",
        200,
    ),
    (
        "POST",
        "recipients/<str:id>/feed-token/revoke/",
        f"recipients/{PERSON}/feed-token/revoke/",
        None,
        "trigger",
        204,
    ),
    ("GET", "recipients/<str:id>/channel-data/push/", f"{CHANNEL_DATA}/push/", None, "read", 200),
    (
        "PUT",
        "recipients/<str:id>/channel-data/push/",
        f"{CHANNEL_DATA}/push/",
        {"devices": [{"provider": "fcm", "token": "t-1"}]},
        "trigger",
        200,
    ),
    (
        "DELETE",
        "recipients/<str:id>/channel-data/push/",
        f"{CHANNEL_DATA}/push/",
        None,
        "trigger",
        204,
    ),
    ("GET", "recipients/<str:id>/channel-data/chat/", f"{CHANNEL_DATA}/chat/", None, "read", 200),
    (
        "PUT",
        "recipients/<str:id>/channel-data/chat/",
        f"{CHANNEL_DATA}/chat/",
        {"connections": [{"provider": "slack", "channel": "C1"}]},
        "trigger",
        200,
    ),
    (
        "DELETE",
        "recipients/<str:id>/channel-data/chat/",
        f"{CHANNEL_DATA}/chat/",
        None,
        "trigger",
        204,
    ),
    (
        "POST",
        "recipients/<str:id>/channel-data/push/devices/",
        f"{CHANNEL_DATA}/push/devices/",
        {"provider": "fcm", "token": "t-2"},
        "trigger",
        201,
    ),
    (
        "DELETE",
        "recipients/<str:id>/channel-data/push/devices/<uuid:device_id>/",
        f"{CHANNEL_DATA}/push/devices/{DEVICE}/",
        None,
        "trigger",
        204,
    ),
    ("GET", "lists/", "lists/", None, "read", 200),
    ("GET", "lists/<slug:key>/", f"lists/{LIST}/", None, "read", 200),
    ("PUT", "lists/<slug:key>/", f"lists/{LIST}/", {"name": "News"}, "trigger", 200),
    ("GET", "lists/<slug:key>/members/", f"lists/{LIST}/members/", None, "read", 200),
    (
        "POST",
        "lists/<slug:key>/members/",
        f"lists/{LIST}/members/",
        {"recipients": ["bob"]},
        "trigger",
        200,
    ),
    (
        "DELETE",
        "lists/<slug:key>/members/",
        f"lists/{LIST}/members/",
        {"recipients": [PERSON]},
        "trigger",
        200,
    ),
]


def _client(scope: str, limited: bool) -> APIClient:
    workflows = ("welcome",) if limited else ()
    raw = api_key_create(name=f"{scope}-key", scope=scope, workflows=workflows)[1]
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return api


def _people() -> None:
    WorkflowFactory(key="welcome")
    Recipient.objects.create(id=PERSON, email="ada@example.com")
    PushDevice.objects.create(id=DEVICE, recipient_id=PERSON, provider="fcm", token="t-0")
    ChatConnection.objects.create(recipient_id=PERSON, provider="slack", channel="C0")
    group = RecipientList.objects.create(key=LIST, name="News")
    ListMembership.objects.create(list=group, recipient_id=PERSON)


def _state() -> tuple:
    """What any people endpoint could change."""
    return (
        list(Recipient.objects.order_by("id").values_list("id", "email", "locale", "preferences")),
        list(RecipientList.objects.order_by("key").values_list("key", "name")),
        list(ListMembership.objects.order_by("recipient_id").values_list("recipient_id")),
        list(PushDevice.objects.order_by("token").values_list("token", "locale")),
        list(ChatConnection.objects.order_by("channel").values_list("channel")),
    )


@pytest.mark.parametrize("limited", [True, False], ids=["limited", "unlimited"])
@pytest.mark.parametrize("scope", ["trigger", "read", "admin"])
@pytest.mark.parametrize(
    ("method", "route", "path", "body", "level", "status"),
    ENDPOINTS,
    ids=[f"{method} {route}" for method, route, *_ in ENDPOINTS],
)
def test_people_endpoints_refuse_workflow_limited_keys(
    limited, scope, method, route, path, body, level, status
):
    _people()
    api = _client(scope, limited)
    before = _state()

    send = getattr(api, method.lower())
    url = f"/api/v1/{path}"
    response = send(url) if body is None else send(url, body, format="json")

    if limited or scope not in LEVELS[level]:
        assert response.status_code == 403, response.content
        assert response.json()["code"] == "permission_denied"
        assert _state() == before
        if limited and scope in LEVELS[level]:
            assert "limited to workflows" in response.json()["message"]
    else:
        assert response.status_code == status, response.content


def _people_routes() -> set[tuple[str, str]]:
    """(method, route) of every handler mounted under /api/v1/recipients/ and lists/."""
    found = set()

    def walk(patterns: list[Any], prefix: str) -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, prefix + str(pattern.pattern))
            elif isinstance(pattern, URLPattern):
                route = prefix + str(pattern.pattern)
                if not route.startswith(("api/v1/recipients/", "api/v1/lists/")):
                    continue
                view = pattern.callback.view_class
                for method in view.http_method_names:
                    if method not in ("options", "head") and hasattr(view, method):
                        found.add((method.upper(), route.removeprefix("api/v1/")))

    walk(get_resolver().url_patterns, "")
    return found


def test_the_matrix_covers_every_people_endpoint():
    assert _people_routes() == {(method, route) for method, route, *_ in ENDPOINTS}


def test_a_workflow_limited_key_still_triggers_its_workflow_with_inline_recipients():
    _people()
    api = _client("trigger", limited=True)
    response = api.post(
        "/api/v1/triggers/",
        {
            "workflow": "welcome",
            "idempotency_key": "k1",
            "payload": PAYLOAD,
            "recipients": [{"id": "carol", "email": "carol@example.com"}, PERSON],
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    assert set(TriggerInstance.objects.values_list("recipient_id", flat=True)) == {"carol", PERSON}
    assert api.get(f"/api/v1/triggers/{response.json()['instances'][0]['id']}/").status_code == (
        200
    )
