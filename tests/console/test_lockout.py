"""Admin login throttling (issue 24 item 7): after AXES_FAILURE_LIMIT wrong passwords for
one username from one address, that pair is locked out - the login page says so (429),
the right password too is refused - until the cool-off ends or `manage.py axes_reset`."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from tests.admin_helpers import PASSWORD, make_superuser

pytestmark = pytest.mark.django_db

LOGIN = reverse("admin:login")


def attempt(client: Client, username: str, password: str, ip: str = "203.0.113.7"):
    return client.post(
        LOGIN,
        {"username": username, "password": password, "next": "/admin/"},
        REMOTE_ADDR=ip,
    )


@pytest.fixture
def limit(settings) -> int:
    settings.AXES_FAILURE_LIMIT = 3
    return 3


def test_repeated_wrong_passwords_lock_the_login_and_the_page_says_so(limit):
    user = make_superuser()
    client = Client()
    for _ in range(limit - 1):
        assert attempt(client, user.username, "wrong").status_code == 200

    locked = attempt(client, user.username, "wrong")

    assert locked.status_code == 429
    page = locked.content.decode()
    assert 'id="login-form"' in page  # the admin's login page, not a bare error
    assert "Too many failed logins" in page and "axes_reset" in page
    refused = attempt(client, user.username, PASSWORD)  # the right password, too late
    assert refused.status_code == 429
    assert "_auth_user_id" not in client.session


def test_the_lockout_is_per_username_and_address(limit):
    user = make_superuser()
    for _ in range(limit):
        attempt(Client(), user.username, "wrong")
    from_elsewhere = attempt(Client(), user.username, PASSWORD, ip="198.51.100.9")
    assert from_elsewhere.status_code == 302  # logged in
    other_user = make_superuser("other")
    assert attempt(Client(), other_user.username, PASSWORD).status_code == 302


def test_axes_reset_unlocks(limit):
    user = make_superuser()
    for _ in range(limit):
        attempt(Client(), user.username, "wrong")
    assert attempt(Client(), user.username, PASSWORD).status_code == 429

    call_command("axes_reset")

    assert attempt(Client(), user.username, PASSWORD).status_code == 302


def test_a_success_resets_the_count(limit):
    user = make_superuser()
    client = Client()
    for _ in range(limit - 1):
        attempt(client, user.username, "wrong")
    assert attempt(client, user.username, PASSWORD).status_code == 302
    for _ in range(limit - 1):
        assert attempt(Client(), user.username, "wrong").status_code == 200
