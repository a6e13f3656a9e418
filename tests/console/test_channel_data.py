"""Operator console: a recipient's page shows their push devices (provider, app, locale,
time zone, the token's end) and chat connections (a Slack channel or user, a webhook's
host - never its URL) and the removals' audit, read-only for operators; an administrator
deletes one through the service (audited, with its status event)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.http import HttpRequest
from django.test import Client
from django.urls import reverse

from recipients.models import ChannelDataRemoval, ChatConnection, PushDevice
from tests.admin_helpers import PASSWORD, make_operator, make_superuser
from tests.factories import ChatConnectionFactory, PushDeviceFactory, RecipientFactory
from tests.webhook_events import kicks, sent_to, subscribe

pytestmark = pytest.mark.django_db
__all__ = ["kicks"]

TOKEN = "fcm-registration-token-" + "Q" * 120 + "-tail1234"
WEBHOOK = "https://hooks.example.com/services/T000/B000/secret-part"


def logged_in(user) -> Client:
    client = Client()
    client.login(request=HttpRequest(), username=user.username, password=PASSWORD)
    return client


def change_url(recipient_id: str) -> str:
    return reverse("admin:recipients_recipient_change", args=[recipient_id])


@pytest.fixture
def ada():
    person = RecipientFactory(id="ada")
    PushDeviceFactory(
        recipient=person,
        token=TOKEN,
        app="com.example.android",
        locale="pt-BR",
        timezone="America/Sao_Paulo",
    )
    PushDeviceFactory(recipient=person, webpush=True)
    ChatConnectionFactory(recipient=person, channel="C0TEAM")
    ChatConnectionFactory(recipient=person, webhook=True, webhook_url=WEBHOOK, provider="msteams")
    return person


def test_operators_see_devices_and_connections_without_their_secrets(ada):
    page = logged_in(make_operator()).get(change_url("ada"))
    assert page.status_code == 200
    body = page.content.decode()
    for shown in (
        "com.example.android",
        "pt-BR",
        "America/Sao_Paulo",
        "…tail1234",
        "C0TEAM",
        "webhook: hooks.example.com",
        "Microsoft Teams",
        "Web Push",
    ):
        assert shown in body, shown
    web = PushDevice.objects.get(recipient=ada, provider="webpush")
    for secret in (TOKEN, WEBHOOK, web.token, web.keys["auth"]):
        assert secret not in body
    # Read-only: no delete box for an operator.
    assert 'name="push_devices-0-DELETE"' not in body
    assert 'name="chat_connections-0-DELETE"' not in body


def test_the_add_page_has_no_channel_data(ada):
    page = logged_in(make_superuser()).get(reverse("admin:recipients_recipient_add"))
    assert page.status_code == 200
    assert "push_devices-TOTAL_FORMS" not in page.content.decode()


def _form_data(page) -> dict[str, Any]:
    """What the browser would post back: the recipient's fields and every inline's
    management form and hidden ids."""
    form = page.context["adminform"].form
    data: dict[str, Any] = {
        name: form.initial.get(name) or "" for name in form.fields if name in form.initial
    }
    for inline in page.context["inline_admin_formsets"]:
        formset = inline.formset
        for name, value in formset.management_form.initial.items():
            data[f"{formset.prefix}-{name}"] = value
        for child in formset.forms:
            for name in ("id", formset.fk.name):
                if name in child.fields:
                    value = child.initial.get(name, getattr(child.instance, f"{name}_id", None))
                    data[child.add_prefix(name)] = value if value is not None else child.instance.pk
    return data


def test_an_administrator_deletes_a_device_and_a_connection_through_the_service(ada, kicks):
    endpoint = subscribe("recipient.device_removed", "recipient.connection_removed")
    client = logged_in(make_superuser())
    page = client.get(change_url("ada"))
    body = page.content.decode()
    assert 'name="push_devices-0-DELETE"' in body
    data = _form_data(page)
    doomed = PushDevice.objects.get(token=TOKEN)
    devices = page.context["inline_admin_formsets"][2].formset
    index = next(i for i, f in enumerate(devices.forms) if f.instance.pk == doomed.pk)
    data[f"push_devices-{index}-id"] = str(doomed.pk)
    data[f"push_devices-{index}-DELETE"] = "on"
    connections = page.context["inline_admin_formsets"][3].formset
    hook = ChatConnection.objects.get(webhook_url=WEBHOOK)
    index = next(i for i, f in enumerate(connections.forms) if f.instance.pk == hook.pk)
    data[f"chat_connections-{index}-id"] = str(hook.pk)
    data[f"chat_connections-{index}-DELETE"] = "on"

    response = client.post(change_url("ada"), data)

    assert response.status_code == 302, response.content.decode()[:3000]
    assert not PushDevice.objects.filter(pk=doomed.pk).exists()
    assert not ChatConnection.objects.filter(pk=hook.pk).exists()
    assert PushDevice.objects.filter(recipient=ada).count() == 1
    audits = ChannelDataRemoval.objects.order_by("channel")
    assert [(a.channel, a.reason, a.source) for a in audits] == [
        ("chat", "deleted", "admin:root"),
        ("push", "deleted", "admin:root"),
    ]
    assert sorted(m.type for m in sent_to(endpoint)) == [
        "recipient.connection_removed",
        "recipient.device_removed",
    ]
    logged = " ".join(str(e.change_message) for e in LogEntry.objects.all())
    assert TOKEN not in logged and WEBHOOK not in logged
    # The page now shows the removals' audit.
    after = client.get(change_url("ada")).content.decode()
    assert "admin:root" in after and "hooks.example.com" in after
