"""Operator console: a recipient's page (preferences, lists, instances, deliveries,
opt-out history) and the exact, indexed search by id, email and phone."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.http import HttpRequest
from django.test import Client
from django.urls import reverse

from console.recipients import recipient_search
from executions.models import Delivery, DeliveryStatus
from notifyflow import db
from recipients.models import ListMembership, OptOut, OptOutSource, Recipient
from tests.admin_helpers import PASSWORD, make_operator, make_superuser
from tests.factories import RecipientFactory, RecipientListFactory, TriggerInstanceFactory

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:recipients_recipient_changelist"


def change_url(recipient: Recipient) -> str:
    return reverse("admin:recipients_recipient_change", args=[recipient.pk])


def logged_in(user: User) -> Client:
    client = Client()
    client.login(request=HttpRequest(), username=user.username, password=PASSWORD)
    return client


@pytest.fixture
def admin_client_() -> Client:
    return logged_in(make_superuser())


@pytest.fixture
def operator_client() -> Client:
    return logged_in(make_operator())


def found(client: Client, term: str) -> list[str]:
    response = client.get(reverse(CHANGELIST), {"q": term})
    assert response.status_code == 200
    return [r.pk for r in response.context["cl"].result_list]


def test_search_finds_by_id_email_in_any_case_and_phone(admin_client_):
    ada = RecipientFactory(id="u-ada", email="Ada@Example.com", phone="+15005550006")
    RecipientFactory(id="u-bob", email="bob@example.com", phone="+15005550007")
    assert found(admin_client_, "u-ada") == [ada.pk]
    assert found(admin_client_, "ada@example.com") == [ada.pk]
    assert found(admin_client_, "ADA@EXAMPLE.COM") == [ada.pk]
    assert found(admin_client_, "+1 500-555-0006") == [ada.pk]
    # Exact matches only: no substring scan.
    assert found(admin_client_, "ada") == []
    assert len(found(admin_client_, "")) == 2


def test_email_search_uses_the_lower_email_index():
    RecipientFactory.create_batch(3)
    queryset = recipient_search(Recipient.objects.all(), "Ada@Example.com")
    if db.is_postgres():  # three rows: PostgreSQL would rather scan them
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL enable_seqscan = off")
    plan = queryset.explain()
    assert "recipient_email_lower" in plan, plan


def test_recipient_page_shows_preferences_lists_instances_deliveries_and_opt_outs(
    admin_client_,
):
    ada = RecipientFactory(
        id="u-ada",
        preferences={"categories": {"marketing": False}},
        properties={"plan": "pro"},
    )
    weekly = RecipientListFactory(key="weekly", name="Weekly digest")
    ListMembership.objects.create(list=weekly, recipient=ada)
    instance = TriggerInstanceFactory(recipient=ada, idempotency_key="order-7")
    Delivery.objects.create(
        instance=instance,
        node_id="hello",
        channel="email",
        recipient="ada@example.com",
        status=DeliveryStatus.SENT,
    )
    OptOut.objects.create(
        recipient=ada,
        scope="categories.marketing",
        source=OptOutSource.ONE_CLICK,
        details={"workflow": "news"},
    )
    response = admin_client_.get(change_url(ada))
    assert response.status_code == 200
    body = response.content.decode()
    assert "&quot;marketing&quot;: false" in body  # preferences, readable JSON
    assert "&quot;plan&quot;: &quot;pro&quot;" in body
    assert reverse("admin:recipients_recipientlist_change", args=[weekly.pk]) in body
    assert reverse("admin:triggers_triggerinstance_change", args=[instance.pk]) in body
    assert "order-7" in body
    assert "ada@example.com" in body and "Sent" in body
    assert "categories.marketing" in body and "one_click" in body
    # History is read-only: no inline form fields for opt-outs or memberships.
    assert 'name="opt_outs-0-scope"' not in body
    assert 'name="memberships-0-list"' not in body


def test_instances_link_filters_the_instance_list_by_recipient(admin_client_):
    ada, bob = RecipientFactory(), RecipientFactory()
    mine = TriggerInstanceFactory(recipient=ada)
    TriggerInstanceFactory(recipient=bob)
    TriggerInstanceFactory()
    response = admin_client_.get(
        reverse("admin:triggers_triggerinstance_changelist"), {"recipient": ada.pk}
    )
    assert response.status_code == 200
    assert [i.pk for i in response.context["cl"].result_list] == [mine.pk]


def test_list_filter_shows_a_lists_members(admin_client_):
    weekly = RecipientListFactory(key="weekly")
    ada, _bob = RecipientFactory(), RecipientFactory()
    ListMembership.objects.create(list=weekly, recipient=ada)
    response = admin_client_.get(reverse(CHANGELIST), {"list": "weekly"})
    assert [r.pk for r in response.context["cl"].result_list] == [ada.pk]


def test_edit_validates_phone_and_time_zone(admin_client_):
    ada = RecipientFactory(id="u-ada")
    data = {
        "email": "ada@example.com",
        "phone": "555 1234",
        "timezone": "Mars/Olympus",
        "locale": "en",
        "memberships-TOTAL_FORMS": "0",
        "memberships-INITIAL_FORMS": "0",
        "opt_outs-TOTAL_FORMS": "0",
        "opt_outs-INITIAL_FORMS": "0",
        "push_devices-TOTAL_FORMS": "0",
        "push_devices-INITIAL_FORMS": "0",
        "chat_connections-TOTAL_FORMS": "0",
        "chat_connections-INITIAL_FORMS": "0",
        "channel_data_removals-TOTAL_FORMS": "0",
        "channel_data_removals-INITIAL_FORMS": "0",
    }
    response = admin_client_.post(change_url(ada), data)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert "E.164" in errors["phone"][0] and "IANA" in errors["timezone"][0]

    data.update(phone="+1 500 555 0006", timezone="Europe/Paris")
    response = admin_client_.post(change_url(ada), data)
    assert response.status_code == 302, response.content.decode()[:2000]
    ada.refresh_from_db()
    assert (ada.phone, ada.timezone) == ("+15005550006", "Europe/Paris")


def test_stock_delete_is_off_erasure_is_the_only_way(admin_client_):
    ada = RecipientFactory()
    response = admin_client_.get(reverse("admin:recipients_recipient_delete", args=[ada.pk]))
    assert response.status_code == 403


def test_operators_view_recipients_and_change_nothing(operator_client):
    ada = RecipientFactory()
    OptOut.objects.create(recipient=ada, scope="workflows.news", source=OptOutSource.API)
    assert operator_client.get(reverse(CHANGELIST)).status_code == 200
    page = operator_client.get(change_url(ada))
    assert page.status_code == 200
    assert "workflows.news" in page.content.decode()
    assert 'name="email"' not in page.content.decode()
    assert operator_client.post(change_url(ada), {"email": "x@example.com"}).status_code == 403
    ada.refresh_from_db()
    assert ada.email != "x@example.com"


def offered_actions(client: Client) -> set[str]:
    form = client.get(reverse(CHANGELIST)).context["action_form"]
    return set(dict(form.fields["action"].choices)) if form is not None else set()


def test_erase_action_erases_the_recipient_and_scrubs_its_deliveries(admin_client_):
    ada = RecipientFactory(email="ada@example.com")
    instance = TriggerInstanceFactory(recipient=ada)
    Delivery.objects.create(
        instance=instance,
        node_id="hello",
        channel="email",
        recipient="ada@example.com",
        status=DeliveryStatus.SENT,
    )
    assert "erase" in offered_actions(admin_client_)
    response = admin_client_.post(
        reverse(CHANGELIST), {"action": "erase", "_selected_action": [ada.pk]}, follow=True
    )
    assert response.status_code == 200
    assert "Erased 1 recipient(s)." in response.content.decode()
    assert not Recipient.objects.filter(pk=ada.pk).exists()
    instance.refresh_from_db()
    assert instance.recipient_erased
    assert list(Delivery.objects.values_list("recipient", flat=True)) == ["[erased]"]


def test_operators_get_no_erase_action(operator_client):
    RecipientFactory()
    assert "erase" not in offered_actions(operator_client)


def test_instance_search_finds_a_recipients_instances_by_id(admin_client_):
    ada = RecipientFactory(id="u-ada")
    mine = TriggerInstanceFactory(recipient=ada)
    TriggerInstanceFactory()
    response = admin_client_.get(
        reverse("admin:triggers_triggerinstance_changelist"), {"q": "u-ada"}
    )
    assert [i.pk for i in response.context["cl"].result_list] == [mine.pk]
