"""Operator console: throttle counters with their count in the window, and the Reset
action (the API's service)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.http import HttpRequest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from gates.models import ThrottleCounter
from gates.throttles import epoch_ms
from tests.admin_helpers import PASSWORD, make_operator, make_superuser
from tests.factories import ThrottleCounterFactory

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:gates_throttlecounter_changelist"


def logged_in(user) -> Client:
    client = Client()
    client.login(request=HttpRequest(), username=user.username, password=PASSWORD)
    return client


def _counters() -> tuple[ThrottleCounter, ThrottleCounter]:
    now = timezone.now()
    full = ThrottleCounterFactory(
        subject="shop:gate",
        key="promo",
        hits=[epoch_ms(now - timedelta(minutes=m)) for m in (90, 30, 10)],
        limit=2,
    )
    person = ThrottleCounterFactory(scope="recipient", subject="ada", key="", hits=[epoch_ms(now)])
    return full, person


def test_changelist_shows_each_key_with_its_count_in_the_window():
    _counters()
    response = logged_in(make_superuser()).get(reverse(CHANGELIST))
    assert response.status_code == 200
    body = response.content.decode()
    assert "shop:gate" in body and "<code>promo</code>" in body
    assert "2 of 2 in 1:00:00" in body and "1 of 2 in 1:00:00" in body
    assert "(none)" in body  # the empty key
    assert "Reset selected throttle keys" in body


def test_search_is_by_exact_subject_and_the_page_is_read_only():
    full, _ = _counters()
    client = logged_in(make_superuser())
    response = client.get(reverse(CHANGELIST), {"q": "ada"})
    assert [c.subject for c in response.context["cl"].result_list] == ["ada"]
    page = client.get(reverse("admin:gates_throttlecounter_change", args=[full.pk]))
    assert page.status_code == 200
    assert 'name="_save"' not in page.content.decode()
    assert client.get(reverse("admin:gates_throttlecounter_add")).status_code == 403


def test_reset_action_deletes_the_selected_counters_only():
    full, person = _counters()
    other = ThrottleCounterFactory(subject="shop:gate", key="other")
    client = logged_in(make_superuser())
    response = client.post(
        reverse(CHANGELIST),
        {"action": "reset", "_selected_action": [full.pk, person.pk]},
        follow=True,
    )
    assert "Reset 2 throttle key(s)." in response.content.decode()
    assert list(ThrottleCounter.objects.all()) == [other]


def test_an_operator_sees_the_counters_and_may_reset():
    full, _ = _counters()
    operator = make_operator()  # the operators group views counters (console 0003)
    assert logged_in(operator).get(reverse(CHANGELIST)).status_code == 200
    response = logged_in(operator).post(
        reverse(CHANGELIST), {"action": "reset", "_selected_action": [full.pk]}, follow=True
    )
    assert response.status_code == 200
    assert not ThrottleCounter.objects.filter(pk=full.pk).exists()
