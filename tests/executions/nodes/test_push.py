"""The ``push`` node through the engine, against the local FCM, APNs and Web Push fakes
with the real clients (nothing mocked in the process): one delivery with a result per
device; a dead token removed after its first failure (audited, with its event) while
the other devices still get the message; a rate limit retried no sooner than its
``Retry-After``; a retry sends only to the devices that did not accept; preferences,
quiet hours in the devices' time zone, skips and the preview."""

from __future__ import annotations

from datetime import UTC, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from executions import engine
from executions.models import Delivery, DeliveryAttempt, SkipReason, StepExecutionLog
from executions.nodes.push import shared_timezone
from executions.outcomes import StepOutcome
from executions.preview import workflow_preview
from notifyflow import metrics
from recipients.models import ChannelDataRemoval, PushDevice
from tests.factories import (
    PushDeviceFactory,
    RecipientFactory,
    TriggerInstanceFactory,
    WorkflowFactory,
)
from tests.webhook_events import kicks, sent_to, subscribe
from triggers.models import TriggerInstance, TriggerStatus

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]
__all__ = ["kicks"]
PAYLOAD = {"order": 42}
FCM_TOKEN = "fcm-token-android:APA91bHandset"


def definition(**config: object) -> dict:
    return {
        "entry_node_id": "notify",
        "nodes": [
            {
                "id": "notify",
                "type": "push",
                "config": {
                    "title": "Order {{ payload.order }} shipped",
                    "body": "Hi {{ recipient.properties.name | default: 'there' }}",
                    "url": "https://shop.example.com/o/{{ payload.order }}",
                    "data": {"order": "{{ payload.order }}", "kind": "shipping"},
                    "collapse_key": "order-{{ payload.order }}",
                    **config,
                },
            },
            {"id": "after", "type": "delay", "config": {"delay_ms": 0}},
        ],
        "edges": [{"from": "notify", "to": "after"}],
    }


@pytest.fixture
def fakes(fake_fcm, fake_apns, fake_webpush):
    return fake_fcm, fake_apns, fake_webpush


def phone(person, token: str = FCM_TOKEN, **fields) -> PushDevice:
    return PushDeviceFactory(recipient=person, token=token, **fields)


def iphone(person, **fields) -> PushDevice:
    return PushDeviceFactory(recipient=person, apns=True, **fields)


def browser(person, fake_webpush, **fields) -> PushDevice:
    subscription = fake_webpush.subscribe()
    return PushDeviceFactory(
        recipient=person,
        provider="webpush",
        token=subscription["endpoint"],
        keys=subscription["keys"],
        **fields,
    )


def instance_for(person, **config: object) -> TriggerInstance:
    flow = WorkflowFactory(definition=definition(**config))
    return TriggerInstanceFactory(workflow=flow, recipient=person, payload=dict(PAYLOAD))


def run(instance: TriggerInstance) -> StepOutcome:
    return engine.step_execute(instance_id=instance.pk)


def run_again(instance: TriggerInstance) -> StepOutcome:
    """The instance's retry, due now."""
    TriggerInstance.objects.filter(pk=instance.pk).update(available_at=timezone.now())
    return run(instance)


def delivery(instance: TriggerInstance) -> Delivery:
    return Delivery.objects.get(instance_id=instance.pk, node_id="notify")


def outcomes(instance: TriggerInstance) -> dict[str, str]:
    return {key: result["outcome"] for key, result in (delivery(instance).targets or {}).items()}


def test_every_device_of_every_provider_gets_it_in_one_delivery(fakes, dispatched, kicks):
    fcm, apns, webpush = fakes
    endpoint = subscribe("delivery.sent")
    ada = RecipientFactory(id="ada", properties={"name": "Ada"})
    android, ios, laptop = phone(ada), iphone(ada), browser(ada, webpush)
    instance = instance_for(ada, badge=3, sound="default", ttl=3600)
    assert run(instance) == StepOutcome.ADVANCED

    ((token, message),) = fcm.received
    assert token == android.token
    assert message["notification"] == {"title": "Order 42 shipped", "body": "Hi Ada"}
    assert message["data"] == {
        "order": "42",
        "kind": "shipping",
        "url": "https://shop.example.com/o/42",
    }
    assert message["android"]["collapse_key"] == "order-42"
    ((apns_token, headers, payload),) = apns.received
    assert apns_token == ios.token and headers["apns-collapse-id"] == "order-42"
    assert payload["aps"] == {
        "alert": {"title": "Order 42 shipped", "body": "Hi Ada"},
        "badge": 3,
        "sound": "default",
    }
    # The browser's push service decrypted what it got (RFC 8291).
    ((_, decrypted, _, _),) = webpush.received
    assert decrypted["title"] == "Order 42 shipped" and decrypted["url"].endswith("/o/42")

    row = delivery(instance)
    assert (row.channel, row.status, row.attempts) == ("push", "sent", 1)
    assert outcomes(instance) == {
        str(android.pk): "accepted",
        str(ios.pk): "accepted",
        str(laptop.pk): "accepted",
    }
    assert row.targets[str(ios.pk)]["target"] == ios.short_token
    assert {a.provider for a in DeliveryAttempt.objects.filter(delivery=row)} == {
        "fcm",
        "apns",
        "webpush",
    }
    output = TriggerInstance.objects.get(pk=instance.pk).vars["push_notify"]
    assert (output["devices"], output["accepted"], output["removed"], output["failed"]) == (
        3,
        3,
        0,
        0,
    )
    assert output["rule"] == "default"
    (event,) = sent_to(endpoint)
    assert event.data["targets"] == {"accepted": 3}
    assert event.data["provider"] == "apns,fcm,webpush"


def test_a_dead_token_is_removed_after_its_first_failure_and_the_others_still_get_it(
    fakes, dispatched, kicks
):
    fcm, apns, webpush = fakes
    removed_events = subscribe("recipient.device_removed")
    ada = RecipientFactory(id="ada")
    gone = phone(ada, token="fcm-token-uninstalled")
    ios = iphone(ada)
    fcm.by_token[gone.token] = "UNREGISTERED"
    instance = instance_for(ada)
    assert run(instance) == StepOutcome.ADVANCED

    assert not PushDevice.objects.filter(pk=gone.pk).exists()
    assert len(apns.received) == 1
    assert outcomes(instance) == {str(gone.pk): "dead", str(ios.pk): "accepted"}
    dead = delivery(instance).targets[str(gone.pk)]
    assert (dead["code"], dead["removed"]) == ("UNREGISTERED", True)
    audit = ChannelDataRemoval.objects.get()
    assert (audit.target_id, audit.reason, audit.source) == (gone.pk, "UNREGISTERED", "provider")
    assert audit.details == {"instance": str(instance.pk), "node": "notify"}
    (event,) = sent_to(removed_events)
    assert event.data["device_id"] == str(gone.pk) and event.data["reason"] == "UNREGISTERED"
    assert TriggerInstance.objects.get(pk=instance.pk).vars["push_notify"]["removed"] == 1

    # The next notification goes to the devices that are left, never to the dead token.
    run(instance_for(ada))
    assert [token for token, _ in fcm.received] == [gone.token]
    assert len(apns.received) == 2


def test_dead_apns_and_webpush_devices_are_removed_by_status_and_reason(fakes, dispatched):
    fcm, apns, webpush = fakes
    ada = RecipientFactory()
    bad, expired = iphone(ada), iphone(ada)
    closed = browser(ada, webpush)
    apns.by_token[bad.token] = (400, "BadDeviceToken")
    apns.by_token[expired.token] = (410, "Unregistered")
    webpush.gone.add(closed.token.rsplit("/", 1)[1])
    keep = phone(ada)
    instance = instance_for(ada)
    assert run(instance) == StepOutcome.ADVANCED
    assert list(PushDevice.objects.filter(recipient=ada)) == [keep]
    assert sorted(ChannelDataRemoval.objects.values_list("reason", flat=True)) == [
        "410",
        "BadDeviceToken",
        "Unregistered",
    ]


def test_a_rate_limit_is_retried_no_sooner_than_its_retry_after(fakes, dispatched):
    fcm, apns, webpush = fakes
    ada = RecipientFactory()
    phone(ada)
    iphone(ada)
    fcm.script.append(("QUOTA_EXCEEDED", {"Retry-After": "900"}))
    instance = instance_for(ada)
    before = timezone.now()
    assert run(instance) == StepOutcome.failed("transient")
    instance.refresh_from_db()
    # The retry policy alone would wait NOTIFYFLOW_RETRY_BASE_DELAY_S (60 s here).
    assert instance.status == TriggerStatus.ENQUEUED and instance.attempts == 1
    assert instance.available_at >= before + timedelta(seconds=900)
    assert instance.available_at <= timezone.now() + timedelta(seconds=901)
    log = StepExecutionLog.objects.get(trigger_id=instance.pk)
    assert "1 of 2 devices to retry (fcm QUOTA_EXCEEDED); 1 accepted" in log.error
    row = delivery(instance)
    assert row.status == "failed"
    assert row.targets[next(k for k, v in row.targets.items() if v["provider"] == "fcm")][
        "retry_after_s"
    ] == pytest.approx(900)


def test_a_retry_sends_only_to_the_devices_that_did_not_accept(fakes, dispatched):
    fcm, apns, webpush = fakes
    ada = RecipientFactory()
    android, ios, laptop = phone(ada), iphone(ada), browser(ada, webpush)
    apns.script.append((503, "ServiceUnavailable"))
    instance = instance_for(ada)
    assert run(instance) == StepOutcome.failed("transient")
    assert outcomes(instance) == {
        str(android.pk): "accepted",
        str(ios.pk): "retry",
        str(laptop.pk): "accepted",
    }
    assert run_again(instance) == StepOutcome.ADVANCED
    assert (len(fcm.received), len(apns.received), len(webpush.received)) == (1, 2, 1)
    row = delivery(instance)
    assert (row.status, row.attempts) == ("sent", 2)
    assert set(outcomes(instance).values()) == {"accepted"}
    # Each attempt's provider calls (made at once), the second one the iPhone's only.
    assert sorted(
        DeliveryAttempt.objects.filter(delivery=row).values_list("attempt", "provider", "outcome")
    ) == [
        (1, "apns", "transient"),
        (1, "fcm", "sent"),
        (1, "webpush", "sent"),
        (2, "apns", "sent"),
    ]


def test_a_transient_failure_of_every_device_is_retried_then_sent(fakes, dispatched):
    fcm, apns, webpush = fakes
    ada = RecipientFactory()
    phone(ada)
    fcm.script.append("UNAVAILABLE")
    instance = instance_for(ada)
    assert run(instance) == StepOutcome.failed("transient")
    instance.refresh_from_db()
    assert instance.available_at > timezone.now() + timedelta(seconds=50)
    assert run_again(instance) == StepOutcome.ADVANCED
    assert len(fcm.received) == 2


def test_a_device_that_fails_permanently_is_not_retried_and_fails_alone(fakes, dispatched):
    fcm, apns, webpush = fakes
    ada = RecipientFactory()
    android, ios = phone(ada), iphone(ada)
    fcm.script.append("SENDER_ID_MISMATCH")
    instance = instance_for(ada)
    assert run(instance) == StepOutcome.ADVANCED
    assert outcomes(instance) == {str(android.pk): "failed", str(ios.pk): "accepted"}
    assert PushDevice.objects.filter(pk=android.pk).exists()  # failed is not dead
    output = TriggerInstance.objects.get(pk=instance.pk).vars["push_notify"]
    assert (output["accepted"], output["failed"]) == (1, 1)


def test_when_every_device_fails_permanently_the_step_fails(fakes, dispatched):
    fcm, apns, webpush = fakes
    ada = RecipientFactory()
    phone(ada)
    fcm.script.append("SENDER_ID_MISMATCH")
    instance = instance_for(ada)
    assert run(instance) == StepOutcome.failed("permanent")
    assert TriggerInstance.objects.get(pk=instance.pk).status == TriggerStatus.FAILED


def test_every_device_dead_is_removed_then_the_step_skipped(fakes, dispatched):
    fcm, apns, webpush = fakes
    ada = RecipientFactory()
    gone = phone(ada)
    fcm.by_token[gone.token] = "UNREGISTERED"
    instance = instance_for(ada)
    assert run(instance) == StepOutcome.ADVANCED
    assert not PushDevice.objects.filter(recipient=ada).exists()
    log = StepExecutionLog.objects.get(trigger_id=instance.pk, node_id="notify")
    assert log.skip_reason == SkipReason.MISSING_CHANNEL_DATA
    assert log.output == {"skipped": True, "reason": "missing_channel_data", "removed": 1}


def test_a_recipient_without_devices_and_an_instance_without_recipient_skip(fakes, dispatched):
    for instance in (instance_for(RecipientFactory()), instance_for(None)):
        assert run(instance) == StepOutcome.ADVANCED
        log = StepExecutionLog.objects.get(trigger_id=instance.pk, node_id="notify")
        assert log.skip_reason == SkipReason.MISSING_CHANNEL_DATA
    assert not Delivery.objects.exists()
    assert fakes[0].received == []


def test_opting_out_of_push_skips_with_the_rule(fakes, dispatched, kicks):
    skipped = subscribe("step.skipped")
    ada = RecipientFactory(preferences={"channels": {"push": False, "email": True}})
    phone(ada)
    instance = instance_for(ada)
    assert run(instance) == StepOutcome.ADVANCED
    log = StepExecutionLog.objects.get(trigger_id=instance.pk, node_id="notify")
    assert log.skip_reason == SkipReason.PREFERENCE_OPT_OUT
    assert log.output["rule"] == "channels.push"
    assert fakes[0].received == []
    (event,) = sent_to(skipped)
    assert (event.data["node_type"], event.data["rule"]) == ("push", "channels.push")


def test_quiet_hours_hold_the_push_in_the_devices_time_zone(fakes, dispatched):
    tokyo = ZoneInfo("Asia/Tokyo")
    local = timezone.now().astimezone(tokyo)
    quiet = {
        "from": (local - timedelta(hours=1)).strftime("%H:%M"),
        "until": (local + timedelta(hours=1)).strftime("%H:%M"),
    }
    # The person's own time zone is Paris, where it is not quiet now; their phone is
    # in Tokyo, where it is.
    ada = RecipientFactory(timezone="Europe/Paris", preferences={"quiet_hours": quiet})
    phone(ada, timezone="Asia/Tokyo")
    instance = instance_for(ada)
    assert run(instance) == StepOutcome.WAITING
    instance.refresh_from_db()
    ends = (local + timedelta(hours=1)).replace(second=0, microsecond=0)
    assert instance.available_at == ends.astimezone(UTC)
    assert fakes[0].received == []


def test_devices_in_several_time_zones_follow_the_recipients():
    def devices(*zones: str | None) -> list[PushDevice]:
        return [PushDevice(timezone=zone) for zone in zones]

    assert shared_timezone(devices("Asia/Tokyo")) == "Asia/Tokyo"
    assert shared_timezone(devices("Asia/Tokyo", "Asia/Tokyo")) == "Asia/Tokyo"
    assert shared_timezone(devices("Asia/Tokyo", "Europe/Paris")) is None
    assert shared_timezone(devices("Asia/Tokyo", None)) is None
    assert shared_timezone(devices(None)) is None
    assert shared_timezone([]) is None


def test_a_rerun_after_the_send_was_recorded_sends_nothing_again(fakes, dispatched):
    fcm, apns, webpush = fakes
    ada = RecipientFactory()
    phone(ada)
    instance = instance_for(ada)
    run(instance)
    # As if the instance came back to the node (an operator's retry of a later failure).
    TriggerInstance.objects.filter(pk=instance.pk).update(
        current_node_id="notify", status=TriggerStatus.ENQUEUED, available_at=timezone.now()
    )
    assert run(instance) == StepOutcome.ADVANCED
    assert len(fcm.received) == 1


def test_a_template_error_or_a_bad_url_fails_the_step_permanently(fakes, dispatched):
    ada = RecipientFactory()
    phone(ada)
    for config in ({"url": "{{ payload.link }}"}, {"title": "{{ payload.nmae }}"}):
        instance = TriggerInstanceFactory(
            workflow=WorkflowFactory(definition=definition(**config)),
            recipient=ada,
            payload={"order": 1, "link": "javascript:alert(1)"},
        )
        assert run(instance) == StepOutcome.failed("permanent")
    assert fakes[0].received == []


def test_the_preview_shows_each_providers_payload_and_sends_nothing(fakes):
    flow = WorkflowFactory(definition=definition(badge=1))
    preview = workflow_preview(key=flow.key, payload=PAYLOAD)
    output = preview["nodes"][0]["output"]
    assert output["preview"] is True and output["devices"] == []
    payloads = output["payloads"]
    assert payloads["fcm"]["notification"] == {"title": "Order 42 shipped", "body": "Hi there"}
    assert payloads["apns"]["payload"]["aps"]["badge"] == 1
    assert payloads["apns"]["headers"]["apns-collapse-id"] == "order-42"
    assert payloads["webpush"]["url"] == "https://shop.example.com/o/42"
    assert fakes[0].received == [] and not Delivery.objects.exists()


def test_each_device_gets_the_message_in_its_own_locale(fakes, dispatched):
    from translations.services import catalogue_put

    fcm, apns, _ = fakes
    catalogue_put(locale="en", namespace="common", messages={"shipped": "Order shipped"})
    catalogue_put(locale="fr", namespace="common", messages={"shipped": "Commande expédiée"})
    ada = RecipientFactory(id="ada", locale="en")
    phone(ada, locale="fr")
    iphone(ada)
    assert run(instance_for(ada, title='{{ "shipped" | t }}')) == StepOutcome.ADVANCED
    ((_, message),) = fcm.received
    assert message["notification"]["title"] == "Commande expédiée"
    ((_, _, payload),) = apns.received
    assert payload["aps"]["alert"]["title"] == "Order shipped"


def translation_missing(locale: str) -> float:
    value = metrics.REGISTRY.get_sample_value(
        "notifyflow_translation_missing_total", {"locale": locale}
    )
    return value or 0


def test_keys_a_devices_own_locale_lacks_are_counted_and_named_in_the_step_log(fakes, dispatched):
    from translations.services import catalogue_put

    fcm, apns, _ = fakes
    catalogue_put(locale="en", namespace="common", messages={"shipped": "Shipped", "eta": "Soon"})
    catalogue_put(locale="fr", namespace="common", messages={"shipped": "Expédiée"})
    ada = RecipientFactory(id="ada", locale="en")
    phone(ada, locale="fr")
    iphone(ada)
    before_fr, before_en = translation_missing("fr"), translation_missing("en")

    instance = instance_for(ada, title='{{ "shipped" | t }}', body='{{ "eta" | t }}')
    assert run(instance) == StepOutcome.ADVANCED

    ((_, message),) = fcm.received
    # Never blank: the French render falls back to the default's text.
    assert message["notification"] == {"title": "Expédiée", "body": "Soon"}
    output = StepExecutionLog.objects.get(trigger_id=instance.pk, node_id="notify").output
    assert output["locale"] == "en" and "translation_missing" not in output
    assert output["translation_missing_by_locale"] == {"fr": ["eta"]}
    assert translation_missing("fr") == before_fr + 1
    assert translation_missing("en") == before_en


def test_a_test_sends_locale_wins_over_each_devices_own(fakes, dispatched):
    from translations.services import catalogue_put

    fcm, apns, _ = fakes
    catalogue_put(locale="en", namespace="common", messages={"shipped": "Order shipped"})
    catalogue_put(locale="fr", namespace="common", messages={"shipped": "Commande expédiée"})
    catalogue_put(locale="es", namespace="common", messages={"shipped": "Pedido enviado"})
    ada = RecipientFactory(id="ada", locale="en")
    phone(ada, locale="fr")
    iphone(ada)
    instance = instance_for(ada, title='{{ "shipped" | t }}')
    TriggerInstance.objects.filter(pk=instance.pk).update(is_test=True, locale="es")

    assert run(instance) == StepOutcome.ADVANCED

    ((_, message),) = fcm.received
    assert message["notification"]["title"] == "Pedido enviado"
    ((_, _, payload),) = apns.received
    assert payload["aps"]["alert"]["title"] == "Pedido enviado"
    output = StepExecutionLog.objects.get(trigger_id=instance.pk, node_id="notify").output
    assert output["locale"] == "es" and "translation_missing_by_locale" not in output
