"""Workflows: their definition, diagram, stats and preview."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ValidationError

from api.fields import (
    InputSerializer,
    JsonObjectField,
    QueryIntegerField,
    QuerySerializer,
    StrictBooleanField,
    StrictCharField,
    StrictIntegerField,
    StrictSlugField,
)
from recipients.ids import MAX_RECIPIENT_ID_LENGTH
from workflows.concurrency import (
    MAX_LIMIT,
    MAX_TEMPLATE_LENGTH,
    NO_LIMIT,
    Concurrency,
    key_template_problem,
)
from workflows.models import Priority, Workflow


class DefinitionField(serializers.JSONField):
    """A workflow definition: any JSON here (``validate_definition`` in the service
    checks it and names node and field); described in OpenAPI by the JSON Schema
    generated from the same specs (``api.openapi``)."""


MAX_CATEGORIES = 20


@extend_schema_field(
    {
        "type": "array",
        "maxItems": MAX_CATEGORIES,
        "uniqueItems": True,
        "items": {"type": "string", "pattern": "^[-a-zA-Z0-9_]+$", "maxLength": 100},
    }
)
class CategoriesField(serializers.ListField):
    """A list of unique slugs: ``not_a_list``, ``invalid`` (a slug), ``duplicate``."""

    default_error_messages = {
        "too_many": "at most {max} categories",
        "duplicate": "{slug!r} is listed twice",
    }

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(child=StrictSlugField(max_length=100), **kwargs)

    def to_internal_value(self, data: Any) -> list[str]:
        if not isinstance(data, list):
            self.fail("not_a_list", input_type=type(data).__name__)
        if len(data) > MAX_CATEGORIES:
            self.fail("too_many", max=MAX_CATEGORIES)
        slugs = super().to_internal_value(data)
        seen: set[str] = set()
        for slug in slugs:
            if slug in seen:
                self.fail("duplicate", slug=slug)
            seen.add(slug)
        return slugs


class ConcurrencyInputSerializer(InputSerializer):
    limit = StrictIntegerField(
        min_value=1,
        max_value=MAX_LIMIT,
        help_text="At most this many steps of its instances execute at once",
    )
    key = StrictCharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=MAX_TEMPLATE_LENGTH,
        help_text="A Liquid template over payload.*, recipient.id, trigger.idempotency_key "
        "and workflow.key, rendered when an instance is created: the limit applies per "
        "rendered key. Left out or empty: one limit for the whole workflow",
    )

    def validate_key(self, value: str) -> str:
        problem = key_template_problem(value)
        if problem is not None:
            raise ValidationError(problem, code="invalid_template")
        return value

    def to_internal_value(self, data: Any) -> Concurrency:
        values = super().to_internal_value(data)
        return Concurrency(limit=values["limit"], key=values["key"])


class WorkflowInputSerializer(InputSerializer):
    key = StrictSlugField(max_length=100, help_text="Stable identifier, e.g. welcome-series")
    name = StrictCharField(max_length=200)
    is_active = StrictBooleanField(
        default=True, help_text="An inactive workflow refuses new triggers"
    )
    definition = DefinitionField(
        help_text="Nodes, edges and entry node; every save adds a version, and running "
        "instances keep the version they started on"
    )
    critical = StrictBooleanField(
        required=False,
        help_text="Sent whatever the recipient's preferences and quiet hours say, without "
        "an unsubscribe link (password resets, one-time codes). Left out: kept (false for "
        "a new workflow)",
    )
    categories = CategoriesField(
        required=False,
        help_text="Category slugs, most significant first: preferences by category, and "
        "what the unsubscribe link opts out of (the first one). Left out: kept (none for a "
        "new workflow)",
    )
    priority = serializers.ChoiceField(
        choices=Priority.choices,
        required=False,
        help_text="Its lane: each is its own queue, and a plain worker takes critical work "
        "first (password resets: critical; newsletters: bulk). A list fan-out of a normal "
        "workflow runs in bulk. A change applies to instances created from then on. Left "
        "out: kept (normal for a new workflow)",
    )
    concurrency = ConcurrencyInputSerializer(
        required=False,
        allow_null=True,
        help_text="At most limit steps of its instances execute at once, per rendered key;"
        " waiting and parked instances do not count. null: no limit. Left out: "
        "kept (no limit for a new workflow)",
    )

    default_locale = StrictCharField(
        max_length=35,
        required=False,
        allow_blank=True,
        help_text="The locale its sends render in when neither the device nor the recipient "
        'names one (BCP 47: en, pt-BR); "": NOTIFYFLOW_DEFAULT_LOCALE. Left out: kept',
    )

    def validate_concurrency(self, value: Concurrency | None) -> Concurrency:
        return NO_LIMIT if value is None else value


class ConcurrencyOutputSerializer(serializers.Serializer):
    limit = serializers.IntegerField(source="concurrency_limit")
    key = serializers.CharField(source="concurrency_key")


class WorkflowOutputSerializer(serializers.ModelSerializer):
    version = serializers.IntegerField(
        source="current_version.version", read_only=True, allow_null=True
    )
    definition = DefinitionField(source="current_version.definition", read_only=True)
    categories = serializers.ListField(child=serializers.CharField(), read_only=True)
    concurrency = serializers.SerializerMethodField()

    class Meta:
        model = Workflow
        fields = [
            "key",
            "name",
            "is_active",
            "is_paused",
            "critical",
            "categories",
            "concurrency",
            "priority",
            "default_locale",
            "version",
            "definition",
            "created_at",
            "updated_at",
        ]

    @extend_schema_field(ConcurrencyOutputSerializer(allow_null=True))
    def get_concurrency(self, workflow: Workflow) -> dict[str, Any] | None:
        if workflow.concurrency_limit is None:
            return None
        return ConcurrencyOutputSerializer(workflow).data


class DiagramQuerySerializer(QuerySerializer):
    """The query string of GET /workflows/{key}/diagram/."""

    format = serializers.ChoiceField(
        choices=["mermaid", "dot"], default="mermaid", help_text="mermaid (default) or dot"
    )
    version = QueryIntegerField(
        min_value=1, required=False, help_text="A version number; the current one if omitted"
    )


class NodeStatsOutputSerializer(serializers.Serializer):
    node_id = serializers.CharField()
    executions = serializers.IntegerField()
    successes = serializers.IntegerField()
    failures = serializers.IntegerField()


class WorkflowStatsOutputSerializer(serializers.Serializer):
    """GET /workflows/{key}/stats/."""

    instances = serializers.DictField(
        child=serializers.IntegerField(), help_text="Instances per status (every status)"
    )
    nodes = NodeStatsOutputSerializer(many=True)


class PreviewInputSerializer(InputSerializer):
    payload = JsonObjectField()
    version = StrictIntegerField(required=False, min_value=1)
    recipient_id = StrictCharField(
        required=False,
        max_length=MAX_RECIPIENT_ID_LENGTH,
        help_text="Render every node for this recipient and say what each would do for "
        "them (404 for an unknown one)",
    )
    locale = StrictCharField(
        required=False,
        max_length=35,
        help_text="Render in this locale (BCP 47: pt-BR); default: as a send would choose "
        "(the recipient's, the workflow's default_locale, NOTIFYFLOW_DEFAULT_LOCALE)",
    )


class TestSendInputSerializer(InputSerializer):
    recipient_id = StrictCharField(max_length=MAX_RECIPIENT_ID_LENGTH)
    payload = JsonObjectField()
    locale = StrictCharField(
        required=False,
        max_length=35,
        help_text="Render in this locale (BCP 47: pt-BR), over the recipient's and a push "
        "device's own; default: as a send would choose",
    )


class PreviewNodeSerializer(serializers.Serializer):
    node_id = serializers.CharField()
    type = serializers.CharField()
    rendered = serializers.JSONField(allow_null=True)
    output = serializers.JSONField(allow_null=True)
    error = serializers.CharField(allow_null=True)
    note = serializers.CharField(required=False)
    recipient = serializers.JSONField(
        required=False,
        allow_null=True,
        help_text="With recipient_id: what the node would do for them (would_send, "
        "skip_reason, rule, deferred_until; a gate's outcome)",
    )


class PreviewOutputSerializer(serializers.Serializer):
    workflow = serializers.CharField()
    version = serializers.IntegerField()
    path = serializers.ListField(child=serializers.CharField())
    nodes = PreviewNodeSerializer(many=True)
    recipient = serializers.JSONField(
        required=False, help_text="With recipient_id: the recipient as templates see them"
    )
    locale = serializers.CharField(help_text="The locale the nodes rendered in")
    translation_missing = serializers.ListField(
        child=serializers.CharField(),
        help_text="Translation keys that locale lacked (rendered in the default locale)",
    )
