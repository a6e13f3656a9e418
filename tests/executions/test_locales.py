"""A step renders in its locale: the recipient's (pt-BR -> pt), else the workflow's
default, else the setting's; a message the locale lacks renders the default's text, is
counted and named in the step log; plurals and dates follow the locale."""

from __future__ import annotations

import pytest

from executions import engine
from executions.models import StepExecutionLog
from notifyflow import metrics
from tests.factories import RecipientFactory, TriggerInstanceFactory
from translations.services import catalogue_delete, catalogue_put
from workflows.services import workflow_save

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]

TITLE = '{{ "order.shipped.title" | t: name: recipient.properties.name }}'
BODY = (
    '{{ "order.parcels" | t: count: payload.parcels }} · '
    '{{ payload.at | datetime: format: "long" }}'
)


@pytest.fixture
def shipped():
    catalogue_put(
        locale="en",
        namespace="common",
        messages={"order": {"parcels": {"one": "%(count)s parcel", "other": "%(count)s parcels"}}},
    )
    catalogue_put(
        locale="en",
        namespace="shipped",
        messages={"order": {"shipped": {"title": "Your order shipped, %(name)s"}}},
    )
    catalogue_put(
        locale="pt",
        namespace="shipped",
        messages={
            "order": {
                "shipped": {"title": "Seu pedido foi enviado, %(name)s"},
                "parcels": {"one": "%(count)s volume", "other": "%(count)s volumes"},
            }
        },
    )
    # French lacks the parcels message: it falls back to English.
    catalogue_put(
        locale="fr",
        namespace="shipped",
        messages={"order": {"shipped": {"title": "Votre commande est partie, %(name)s"}}},
    )
    definition = {
        "entry_node_id": "bell",
        "nodes": [{"id": "bell", "type": "in_app", "config": {"title": TITLE, "body": BODY}}],
        "edges": [],
    }
    return workflow_save(key="shipped", name="Shipped", definition=definition)


def run(workflow, locale: str | None, parcels: int = 2) -> StepExecutionLog:
    person = RecipientFactory(locale=locale, timezone="UTC", properties={"name": "Ana"})
    instance = TriggerInstanceFactory(
        workflow=workflow,
        recipient=person,
        payload={"parcels": parcels, "at": "2026-03-05T10:00:00Z"},
    )
    engine.step_execute(instance_id=instance.pk)
    return StepExecutionLog.objects.get(trigger_id=instance.pk)


def missing(locale: str) -> float:
    value = metrics.REGISTRY.get_sample_value(
        "notifyflow_translation_missing_total", {"locale": locale}
    )
    return value or 0


def test_brazilian_recipient_gets_the_portuguese_text(shipped):
    log = run(shipped, "pt-BR")
    assert log.success
    assert log.output["title"] == "Seu pedido foi enviado, Ana"
    assert log.output["locale"] == "pt-BR"
    assert "translation_missing" not in log.output


def test_french_recipient_gets_french_and_a_missing_message_falls_back_counted(shipped):
    before = missing("fr")
    log = run(shipped, "fr")
    assert log.output["title"] == "Votre commande est partie, Ana"
    assert log.output["translation_missing"] == ["order.parcels"]
    assert missing("fr") == before + 1


def test_locale_without_catalogue_gets_the_default_text(shipped):
    log = run(shipped, "de")
    assert log.output["title"] == "Your order shipped, Ana"
    assert log.output["locale"] == "de"


def test_workflow_default_locale_applies_when_the_recipient_has_none(shipped):
    shipped.default_locale = "pt"
    shipped.save(update_fields=["default_locale"])
    log = run(shipped, None)
    assert log.output["title"] == "Seu pedido foi enviado, Ana"


def test_setting_locale_applies_when_nobody_names_one(shipped, settings):
    settings.NOTIFYFLOW_DEFAULT_LOCALE = "fr"
    log = run(shipped, None)
    assert log.output["title"] == "Votre commande est partie, Ana"


def test_plural_and_date_follow_the_locale(shipped):
    from feed.models import FeedItem

    run(shipped, "pt-BR", parcels=1)
    run(shipped, "en", parcels=1)
    bodies = sorted(FeedItem.objects.values_list("body", flat=True))
    # CLDR puts a narrow no-break space before AM.
    assert bodies == [
        "1 parcel · March 5, 2026, 10:00:00\u202fAM UTC",
        "1 volume · 5 de março de 2026 10:00:00 UTC",
    ]


def test_key_missing_everywhere_renders_the_key_never_blank():
    catalogue_put(locale="en", namespace="plain", messages={"gone": {"title": "Gone"}})
    definition = {
        "entry_node_id": "bell",
        "nodes": [
            {
                "id": "bell",
                "type": "in_app",
                "config": {"title": '{{ "gone.title" | t }}', "body": "b"},
            }
        ],
        "edges": [],
    }
    workflow = workflow_save(key="plain", name="Plain", definition=definition)
    # Saved while the key existed; the catalogue is deleted afterwards.
    catalogue_delete(locale="en", namespace="plain")
    log = run(workflow, "en")
    assert log.output["title"] == "gone.title"
    assert log.output["translation_missing"] == ["gone.title"]


def test_preview_renders_in_the_locale_asked_and_says_which(shipped):
    from executions.preview import workflow_preview

    person = RecipientFactory(locale="pt-BR", timezone="UTC", properties={"name": "Ana"})
    payload = {"parcels": 3, "at": "2026-03-05T10:00:00Z"}
    answer = workflow_preview(key="shipped", payload=payload, recipient_id=person.id, locale="fr")
    assert answer["locale"] == "fr"
    assert answer["translation_missing"] == ["order.parcels"]
    rendered = answer["nodes"][0]["rendered"]
    assert rendered["title"] == "Votre commande est partie, Ana"
    assert rendered["body"].startswith("3 parcels · 5 mars 2026")
    as_recipient = workflow_preview(key="shipped", payload=payload, recipient_id=person.id)
    assert as_recipient["locale"] == "pt-BR"


def test_preview_refuses_an_unknown_locale(shipped):
    from executions.preview import workflow_preview
    from notifyflow.errors import ApplicationError

    with pytest.raises(ApplicationError) as caught:
        workflow_preview(key="shipped", payload={}, locale="klingon")
    assert caught.value.code == "invalid_locale"


def test_a_test_sends_locale_wins_over_the_recipients(shipped):
    person = RecipientFactory(locale="pt-BR", timezone="UTC", properties={"name": "Ana"})
    instance = TriggerInstanceFactory(
        workflow=shipped,
        recipient=person,
        payload={"parcels": 2, "at": "2026-03-05T10:00:00Z"},
        is_test=True,
        locale="fr",
    )
    engine.step_execute(instance_id=instance.pk)
    log = StepExecutionLog.objects.get(trigger_id=instance.pk)
    assert log.output["title"] == "Votre commande est partie, Ana"
    assert log.output["locale"] == "fr"
    assert log.output["translation_missing"] == ["order.parcels"]
