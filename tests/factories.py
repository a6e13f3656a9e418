from __future__ import annotations

import base64

import factory
from django.utils import timezone

from notifyflow.ids import uuid7
from status_webhooks.signing import secret_generate
from triggers.models import TriggerInstance, TriggerStatus
from triggers.state import NewInstance
from workflows.models import Workflow
from workflows.services import workflow_save


def email_sms_definition(delay: str | None = None) -> dict:
    nodes = [
        {
            "id": "hello",
            "type": "email",
            "config": {
                "to": "{{ payload.email }}",
                "subject": "Hi {{ payload.name }}",
                "body": "Hello {{ payload.name }}",
            },
        },
        {
            "id": "text",
            "type": "sms",
            "config": {"to": "{{ payload.phone }}", "body": "Hi {{ payload.name }}"},
        },
    ]
    edges = [{"from": "hello", "to": "text"}]
    if delay:
        nodes.insert(1, {"id": "wait", "type": "delay", "config": {"duration": delay}})
        edges = [{"from": "hello", "to": "wait"}, {"from": "wait", "to": "text"}]
    return {"entry_node_id": "hello", "nodes": nodes, "edges": edges}


def email_definition(body: str, *, to: str = "{{ payload.email }}") -> dict:
    """One email node, ``mail``, with this body: a definition to try one template in."""
    return {
        "entry_node_id": "mail",
        "nodes": [
            {"id": "mail", "type": "email", "config": {"to": to, "subject": "s", "body": body}}
        ],
        "edges": [],
    }


def render_error_definition() -> dict:
    """email_sms_definition with a typo in the SMS body: rendering it is a permanent
    error (an undefined variable)."""
    definition = email_sms_definition()
    definition["nodes"][1]["config"]["body"] = "Hi {{ payload.nmae }}"
    return definition


PAYLOAD = {"name": "Ada", "email": "ada@example.com", "phone": "+15005550006"}


def new_instance(wf: Workflow, key: str, **fields: object) -> NewInstance:
    """An instance for the state machine's creation (``triggers.state.NewInstance``) of
    ``wf``'s current version under ``key``: PAYLOAD, entry node ``hello``."""
    return NewInstance(
        id=uuid7(),
        workflow_id=wf.pk,
        workflow_version_id=wf.current_version_id,
        idempotency_key=key,
        payload=dict(PAYLOAD),
        entry_node_id="hello",
        **fields,  # type: ignore[arg-type]
    )


class WorkflowFactory(factory.django.DjangoModelFactory):
    """Builds through the service, so every workflow has a validated version."""

    class Meta:
        model = Workflow

    key = factory.Sequence(lambda n: f"workflow-{n}")
    name = factory.LazyAttribute(lambda o: o.key.replace("-", " ").title())
    is_active = True
    definition = factory.LazyFunction(email_sms_definition)
    # A workflows.concurrency.Concurrency; None: no limit.
    concurrency = None
    priority = "normal"

    @classmethod
    def _create(cls, model_class, *args, **kwargs):
        return workflow_save(
            key=kwargs["key"],
            name=kwargs["name"],
            is_active=kwargs["is_active"],
            definition=kwargs["definition"],
            concurrency=kwargs.get("concurrency"),
            priority=kwargs.get("priority"),
        )


class TriggerInstanceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = TriggerInstance

    workflow = factory.SubFactory(WorkflowFactory)
    workflow_version = factory.LazyAttribute(lambda o: o.workflow.current_version)
    idempotency_key = factory.Sequence(lambda n: f"key-{n}")
    payload = factory.LazyFunction(lambda: dict(PAYLOAD))
    status = TriggerStatus.ENQUEUED
    current_node_id = factory.LazyAttribute(
        lambda o: o.workflow_version.definition["entry_node_id"]
    )
    available_at = factory.LazyFunction(timezone.now)
    # As the services set it: the workflow's priority (a list fan-out's: fanout_lane).
    lane = factory.LazyAttribute(lambda o: o.workflow.priority)


def bulk_instances(workflow: Workflow, counts: dict[str, int]) -> list[TriggerInstance]:
    """Many instances of ``workflow`` in one INSERT, ``counts`` per status, all due now
    at its entry node, in its lane (plan tests need thousands: the factory's
    row-at-a-time create is too slow)."""
    now = timezone.now()
    assert workflow.current_version is not None
    entry = workflow.current_version.definition["entry_node_id"]
    return TriggerInstance.objects.bulk_create(
        [
            TriggerInstance(
                workflow=workflow,
                workflow_version=workflow.current_version,
                idempotency_key=f"{status}-{n}",
                payload={},
                current_node_id=entry,
                available_at=now,
                status=status,
                lane=workflow.priority,
            )
            for status, count in counts.items()
            for n in range(count)
        ]
    )


class WorkflowTriggerFactory(factory.django.DjangoModelFactory):
    """An event → workflow binding; ``idempotency_setting`` is stored as given (normalize
    it with IdempotencySettings.parse(...).to_json() when a test needs the stored form)."""

    class Meta:
        model = "triggers.WorkflowTrigger"

    event_name = factory.Sequence(lambda n: f"EVENT_{n}")
    workflow = factory.SubFactory(WorkflowFactory)
    is_active = True
    idempotency_setting = factory.LazyFunction(lambda: {"strategy": "UUID"})


def wait_definition(
    *,
    event: str = "reply",
    timeout: str = "1h",
    match: str | None = None,
    interests: list[str] | None = None,
    cancel_on: list[dict] | None = None,
) -> dict:
    """Wait for ``event`` (or time out), then email "got it" or SMS "no reply"."""
    wait_config: dict = {"event": event, "timeout": timeout}
    if match:
        wait_config["match"] = match
    definition: dict = {
        "entry_node_id": "listen",
        "nodes": [
            {"id": "listen", "type": "wait", "config": wait_config},
            {
                "id": "thanks",
                "type": "email",
                "config": {"to": "{{ payload.email }}", "subject": "Got it", "body": "thanks"},
            },
            {"id": "nudge", "type": "sms", "config": {"to": "{{ payload.phone }}", "body": "?"}},
        ],
        "edges": [
            {"from": "listen", "to": "thanks", "condition": "vars.wait_listen.received"},
            {"from": "listen", "to": "nudge"},
        ],
    }
    if interests is not None:
        definition["interests"] = interests
    if cancel_on is not None:
        definition["cancel_on"] = cancel_on
    return definition


# --- recipients (issue 26, helper H1) ---------------------------------------------------


class RecipientFactory(factory.django.DjangoModelFactory):
    """A person with an e-mail address and a phone number of their own."""

    class Meta:
        model = "recipients.Recipient"

    id = factory.Sequence(lambda n: f"user-{n}")
    email = factory.LazyAttribute(lambda o: f"{o.id}@example.com")
    phone = factory.Sequence(lambda n: f"+1555{n:07d}")
    timezone = "Europe/Paris"
    locale = "en"
    properties = factory.LazyFunction(dict)
    preferences = factory.LazyFunction(dict)


def webpush_keys(seed: int = 0) -> dict[str, str]:
    """A Web Push subscription's keys of the right shapes: base64url of an uncompressed
    P-256 point's 65 bytes (0x04 first) and of a 16-byte secret (not a real key pair:
    enough for storing, not for encrypting)."""
    point = b"\x04" + seed.to_bytes(4, "big") * 16
    secret = seed.to_bytes(4, "big") * 4
    return {
        "p256dh": base64.urlsafe_b64encode(point).decode().rstrip("="),
        "auth": base64.urlsafe_b64encode(secret).decode().rstrip("="),
    }


class PushDeviceFactory(factory.django.DjangoModelFactory):
    """A recipient's FCM device (``apns=True``: an APNs one; ``webpush=True``: a browser's
    subscription on FCM's Web Push endpoint, allowed by default)."""

    class Meta:
        model = "recipients.PushDevice"

    class Params:
        apns = factory.Trait(provider="apns", token=factory.Sequence(lambda n: f"{n:064x}"))
        webpush = factory.Trait(
            provider="webpush",
            token=factory.Sequence(lambda n: f"https://fcm.googleapis.com/fcm/send/sub-{n}"),
            keys=factory.Sequence(webpush_keys),
        )

    recipient = factory.SubFactory(RecipientFactory)
    provider = "fcm"
    token = factory.Sequence(lambda n: f"fcm-token-{n:06d}:APA91b{n:040d}")
    keys = None
    locale = "en-GB"
    timezone = "Europe/London"
    app = "com.example.app"


class ChatConnectionFactory(factory.django.DjangoModelFactory):
    """A recipient's Slack channel (``slack_user=True``: a Slack user instead;
    ``webhook=True``: an incoming webhook on hooks.example.com, which a test must allow)."""

    class Meta:
        model = "recipients.ChatConnection"

    class Params:
        slack_user = factory.Trait(channel=None, user=factory.Sequence(lambda n: f"U{n:08d}"))
        webhook = factory.Trait(
            channel=None,
            webhook_url=factory.Sequence(lambda n: f"https://hooks.example.com/services/T{n:08d}"),
        )

    recipient = factory.SubFactory(RecipientFactory)
    provider = "slack"
    channel = factory.Sequence(lambda n: f"C{n:08d}")
    user = None
    webhook_url = None


class RecipientListFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = "recipients.RecipientList"

    key = factory.Sequence(lambda n: f"list-{n}")
    name = factory.LazyAttribute(lambda o: o.key.replace("-", " ").title())


class FanOutFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = "triggers.FanOut"

    workflow = factory.SubFactory(WorkflowFactory)
    workflow_version = factory.LazyAttribute(lambda o: o.workflow.current_version)
    idempotency_key = factory.Sequence(lambda n: f"fanout-{n}")
    lists = factory.LazyFunction(lambda: ["list-0"])


# --- Throttles (issue 27) -------------------------------------------------------------


def throttle_definition(
    *,
    limit: int = 2,
    window: str = "1h",
    scope: str | None = None,
    on_limit: str | None = None,
    key: str | None = None,
) -> dict:
    """A throttle node ``gate`` in front of email_sms_definition's email and SMS."""
    config: dict = {"limit": limit, "window": window}
    for name, value in (("scope", scope), ("on_limit", on_limit), ("key", key)):
        if value is not None:
            config[name] = value
    definition = email_sms_definition()
    definition["nodes"].insert(0, {"id": "gate", "type": "throttle", "config": config})
    definition["edges"].insert(0, {"from": "gate", "to": "hello"})
    definition["entry_node_id"] = "gate"
    return definition


class ThrottleCounterFactory(factory.django.DjangoModelFactory):
    """A workflow-scope counter with ``hits`` (epoch ms) as given."""

    class Meta:
        model = "gates.ThrottleCounter"

    scope = "workflow"
    subject = factory.Sequence(lambda n: f"workflow-{n}:gate")
    key = ""
    hits = factory.LazyFunction(list)
    limit = 2
    window_ms = 3_600_000
    updated_at = factory.LazyFunction(timezone.now)


# --- Batches (issue 27, helper "batch") ---------------------------------------------------


def batch_definition(*, window: str | None = "1m", key: str | None = None, **extra: object) -> dict:
    """A "comment" digest: a batch node, then one email saying how many came (``window``
    None: give a ``schedule`` in ``extra``)."""
    config: dict = {**({"window": window} if window is not None else {}), **extra}
    if key is not None:
        config["key"] = key
    return {
        "entry_node_id": "collect",
        "nodes": [
            {"id": "collect", "type": "batch", "config": config},
            {
                "id": "digest",
                "type": "email",
                "config": {
                    "to": "{{ payload.email }}",
                    "subject": "{{ vars.batch_collect.count }} new comments",
                    "body": "First: {{ vars.batch_collect.first.text }}",
                },
            },
        ],
        "edges": [{"from": "collect", "to": "digest"}],
    }


class BatchWorkflowFactory(WorkflowFactory):
    definition = factory.LazyFunction(batch_definition)


class BatchInstanceFactory(TriggerInstanceFactory):
    """An instance of a batch workflow, at its batch node, due now."""

    workflow = factory.SubFactory(BatchWorkflowFactory)
    payload = factory.Sequence(lambda n: {**PAYLOAD, "text": f"comment {n}"})


# --- Status webhooks (issue 28, helper "hw") ----------------------------------------------


class WebhookEndpointFactory(factory.django.DjangoModelFactory):
    """An active endpoint wanting instance.completed, with a real secret (its host must
    be in NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS for the deliverer to call it)."""

    class Meta:
        model = "status_webhooks.WebhookEndpoint"

    url = "http://127.0.0.1:9/hook"
    event_types = factory.LazyFunction(lambda: ["instance.completed"])
    secret = factory.LazyFunction(secret_generate)


# --- In-app feed (issue 28) -----------------------------------------------------------------


def in_app_definition(**config: object) -> dict:
    """One in_app node, ``bell``, then an email: the feed item of a "new comment"."""
    node_config: dict = {
        "title": "New comment from {{ payload.name }}",
        "body": "{{ payload.name }} replied",
        "url": "https://app.example.com/c/{{ payload.comment_id }}",
        "data": {"comment_id": "{{ payload.comment_id }}", "kind": "comment"},
        **config,
    }
    return {
        "entry_node_id": "bell",
        "nodes": [
            {"id": "bell", "type": "in_app", "config": node_config},
            {
                "id": "mail",
                "type": "email",
                "config": {"subject": "New comment", "body": "{{ payload.name }} replied"},
            },
        ],
        "edges": [{"from": "bell", "to": "mail"}],
    }


class FeedWorkflowFactory(WorkflowFactory):
    definition = factory.LazyFunction(in_app_definition)

    @classmethod
    def _create(cls, model_class, *args, **kwargs):
        return workflow_save(
            key=kwargs["key"],
            name=kwargs["name"],
            is_active=kwargs["is_active"],
            definition=kwargs["definition"],
            categories=kwargs.get("categories", ["comments"]),
            critical=kwargs.get("critical", False),
        )


def feed_items(recipient, count: int, *, workflow: Workflow | None = None) -> list:
    """``count`` feed items of ``recipient`` written through the service (counted), one
    instance each, the newest last."""
    from feed.models import FeedItem
    from feed.services import feed_item_write

    workflow = workflow or FeedWorkflowFactory()
    ids = []
    for n in range(count):
        instance = TriggerInstanceFactory(workflow=workflow, recipient=recipient)
        ids.append(
            feed_item_write(
                recipient_id=recipient.pk,
                workflow_id=workflow.pk,
                instance_id=instance.pk,
                node_id="bell",
                title=f"Item {n}",
                body=f"Body {n}",
                url="",
                category="comments",
                data={"n": n},
                now=timezone.now(),
            ).item_id
        )
    return list(FeedItem.objects.filter(pk__in=ids).order_by("created_at", "id"))
