"""Recipients (people): upsert, merge, read, search, bulk upsert, erase; their
preferences and what the preferences decide."""

from __future__ import annotations

from django.db.models import Q, QuerySet
from django.http import Http404
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import ApiView, no_body, paginated_list, validated_body
from api.pagination import RecipientsById
from api.parsers import PartsCheckedJSONParser
from api_keys.authentication import request_key
from executions.erasure import recipient_erase
from feed.tokens import feed_token_create, feed_tokens_revoke
from notifyflow.errors import ApplicationError
from recipients.models import Recipient
from recipients.preference_settings import preference_decision, preferences_of, preferences_set
from recipients.services import (
    recipient_or_404,
    recipient_patch,
    recipient_put,
    recipients_bulk_upsert,
)

from ..permissions import PEOPLE_PERMISSIONS, actor
from ..serializers.feed import FeedTokenOutputSerializer
from ..serializers.preferences import (
    EvaluateOutputSerializer,
    EvaluateQuerySerializer,
    PreferencesSerializer,
)
from ..serializers.recipients import (
    _PHONE_NOISE,
    ID_SCHEMA,
    RecipientBulkInputSerializer,
    RecipientBulkOutputSerializer,
    RecipientFieldsSerializer,
    RecipientOutputSerializer,
    RecipientSearchSerializer,
    valid_recipient_id,
)

ID_PARAMETER = OpenApiParameter("id", ID_SCHEMA, OpenApiParameter.PATH, description="Recipient id")
# Writes recipients: trigger (or admin); reads: read (or admin); erasure: admin.
WRITE_SCOPES = {"PUT": "trigger", "PATCH": "trigger", "POST": "trigger", "GET": "read"}


class _OneRecipient(ApiView):
    """A view of one recipient (``id`` in the path)."""

    permission_classes = PEOPLE_PERMISSIONS

    def get_object(self) -> Recipient:
        # Only DRF's OPTIONS metadata calls it (the handlers look up themselves): any
        # id that names no recipient is "no object".
        try:
            return recipient_or_404(valid_recipient_id(self.kwargs.get("id")))
        except ApplicationError:
            raise Http404 from None


def _search(queryset: QuerySet, term: str) -> QuerySet:
    condition = Q(pk__startswith=term) | Q(email__istartswith=term)
    phone = _PHONE_NOISE.sub("", term)
    if phone:
        condition |= Q(phone__startswith=phone)
    return queryset.filter(condition)


class RecipientListView(ApiView):
    serializer_class = RecipientOutputSerializer
    pagination_class = RecipientsById
    query_serializer_class = RecipientSearchSerializer
    permission_classes = PEOPLE_PERMISSIONS
    required_scope = {"GET": "read"}

    @extend_schema(
        parameters=[RecipientSearchSerializer],
        responses=RecipientOutputSerializer(many=True),
        description="Recipients by id; `search` matches the start of an id, e-mail "
        "address (any case) or phone number.",
    )
    def get(self, request: Request) -> Response:
        return paginated_list(self, Recipient.objects.all(), {"search": _search})


class RecipientBulkView(ApiView):
    """Create or update up to 1,000 recipients in one request: 200 with one result per
    item; 400 only for a malformed envelope or too many items."""

    serializer_class = RecipientBulkOutputSerializer
    parser_classes = [PartsCheckedJSONParser]
    permission_classes = PEOPLE_PERMISSIONS
    required_scope = {"POST": "trigger"}
    body_limit = "NOTIFYFLOW_MAX_BULK_BODY_BYTES"

    @extend_schema(
        request=RecipientBulkInputSerializer,
        responses={200: RecipientBulkOutputSerializer},
        operation_id="v1_recipients_bulk_create",
        description="Each item is created (`created`) or has the fields it names set, the "
        "others kept (`updated`); an invalid item (`invalid`, with the error PUT would "
        "answer) writes nothing. The valid items are written in one transaction.",
    )
    def post(self, request: Request) -> Response:
        body = validated_body(request, RecipientBulkInputSerializer)
        outcomes = recipients_bulk_upsert(items=body["items"], actor=actor(request_key(request)))
        return Response(RecipientBulkOutputSerializer(outcomes).data)


class RecipientDetailView(_OneRecipient):
    serializer_class = RecipientOutputSerializer
    required_scope = {**WRITE_SCOPES, "DELETE": "admin"}

    @extend_schema(parameters=[ID_PARAMETER])
    def get(self, request: Request, id: str) -> Response:
        recipient = recipient_or_404(valid_recipient_id(id))
        return Response(self.get_serializer(recipient).data)

    @extend_schema(
        parameters=[ID_PARAMETER],
        request=RecipientFieldsSerializer,
        responses={200: RecipientOutputSerializer, 201: RecipientOutputSerializer},
        description="201: created. 200: replaced - every field the body leaves out becomes "
        "null (`properties`: {}). Preferences are kept (they have their own endpoint).",
    )
    def put(self, request: Request, id: str) -> Response:
        recipient_id = valid_recipient_id(id)
        fields = validated_body(request, RecipientFieldsSerializer)
        recipient, created = recipient_put(recipient_id=recipient_id, fields=fields)
        return Response(
            self.get_serializer(recipient).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )

    @extend_schema(
        parameters=[ID_PARAMETER],
        request=RecipientFieldsSerializer,
        responses={200: RecipientOutputSerializer},
        description="Sets the fields the body names (null clears one), keeps the others; "
        "404 for an unknown recipient.",
    )
    def patch(self, request: Request, id: str) -> Response:
        recipient_id = valid_recipient_id(id)
        fields = validated_body(request, RecipientFieldsSerializer)
        recipient = recipient_patch(recipient_id=recipient_id, fields=fields)
        return Response(self.get_serializer(recipient).data)

    @extend_schema(
        parameters=[ID_PARAMETER],
        request=None,
        responses={204: None},
        description="Erases the person (admin scope), in one transaction: the recipient, its "
        "preferences, list memberships, opt-out history, feed items and feed tokens go; its "
        "instances not yet finished are cancelled (`recipient erased`); afterwards no stored "
        "row or answer holds its email address or phone number (`[erased]` in the history, "
        "idempotency keys `erased:<instance id>`, batch and throttle keys, event records).",
    )
    def delete(self, request: Request, id: str) -> Response:
        recipient_erase(recipient_id=valid_recipient_id(id), actor=actor(request_key(request)))
        return Response(status=status.HTTP_204_NO_CONTENT)


class RecipientPreferencesView(_OneRecipient):
    serializer_class = PreferencesSerializer
    required_scope = WRITE_SCOPES

    @extend_schema(parameters=[ID_PARAMETER], responses={200: PreferencesSerializer})
    def get(self, request: Request, id: str) -> Response:
        return Response(preferences_of(recipient_or_404(valid_recipient_id(id))))

    @extend_schema(
        parameters=[ID_PARAMETER],
        request=PreferencesSerializer,
        responses={200: PreferencesSerializer},
        description="Replaces the preferences (sections left out are emptied), except the "
        "person's own opt-outs (one-click, unsubscribe page, ESP): kept unless the body "
        "writes that same setting true (a resubscription, audited), 409 `opted_out` if it "
        "would override one otherwise. Every setting that newly says false is an opt-out "
        "audit row (source `api:<key name>`).",
    )
    def put(self, request: Request, id: str) -> Response:
        return self._save(request, id, merge=False)

    @extend_schema(
        parameters=[ID_PARAMETER],
        request=PreferencesSerializer,
        responses={200: PreferencesSerializer},
        description="Merges: each setting named replaces the one there, null removes it "
        "(a section set to null is emptied; `quiet_hours` is replaced whole); the person's "
        "own opt-outs are kept as for PUT.",
    )
    def patch(self, request: Request, id: str) -> Response:
        return self._save(request, id, merge=True)

    def _save(self, request: Request, id: str, *, merge: bool) -> Response:
        recipient_id = valid_recipient_id(id)
        preferences = validated_body(request, PreferencesSerializer)
        recipient = preferences_set(
            recipient_id=recipient_id,
            preferences=preferences,
            merge=merge,
            actor=actor(request_key(request)),
        )
        return Response(preferences_of(recipient))


class RecipientPreferencesEvaluateView(_OneRecipient):
    """Whether a message of the workflow on the channel would be sent to the recipient,
    and the setting that decides (the rule every send uses); nothing is sent. 404 for
    an unknown recipient or workflow."""

    serializer_class = EvaluateOutputSerializer
    query_serializer_class = EvaluateQuerySerializer

    @extend_schema(
        parameters=[ID_PARAMETER, EvaluateQuerySerializer],
        responses={200: EvaluateOutputSerializer},
    )
    def get(self, request: Request, id: str) -> Response:
        decision = preference_decision(
            recipient_id=valid_recipient_id(id),
            workflow_key=self.query["workflow"],
            channel=self.query["channel"],
        )
        return Response({"send": decision.send, "rule": decision.rule})


class RecipientFeedTokenView(_OneRecipient):
    """A recipient token for the in-app feed (``/api/v1/feed/``), good for
    NOTIFYFLOW_FEED_TOKEN_TTL_S seconds (1 h by default): mint it in your backend and
    hand it to the recipient's browser. 404 for an unknown recipient."""

    serializer_class = FeedTokenOutputSerializer
    required_scope = {"POST": "trigger"}

    @extend_schema(parameters=[ID_PARAMETER], request=None, responses=FeedTokenOutputSerializer)
    def post(self, request: Request, id: str) -> Response:
        no_body(request)
        minted = feed_token_create(recipient_id=valid_recipient_id(id), now=timezone.now())
        return Response({"token": minted.token, "expires_at": minted.expires_at})


class RecipientFeedTokenRevokeView(_OneRecipient):
    """Revoke every feed token minted for the recipient so far: from now on they get 401
    ``token_revoked``; tokens minted afterwards work. Erasing the recipient revokes
    them too. 404 for an unknown recipient."""

    # No body either way; DRF's OPTIONS answer describes the POST by a serializer.
    serializer_class = serializers.Serializer
    required_scope = {"POST": "trigger"}

    @extend_schema(parameters=[ID_PARAMETER], request=None, responses={204: None})
    def post(self, request: Request, id: str) -> Response:
        no_body(request)
        feed_tokens_revoke(recipient_id=valid_recipient_id(id))
        return Response(status=status.HTTP_204_NO_CONTENT)
