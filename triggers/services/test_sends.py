"""Test sends: a workflow run for real to one chosen recipient, marked ``is_test`` -
shown as a test in the console and the API, left out of the stats. The console's form
and ``POST /api/v1/workflows/{key}/test/`` (docs/api.md) both call this. A test send may
name a locale: every render of the instance then uses it (``TriggerInstance.locale``)."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction

from api_keys.models import ApiKey
from notifyflow.errors import NotFoundError
from recipients.models import Recipient
from translations.locales import locale_check
from workflows.models import Workflow

from ..models import TriggerInstance
from .people import RecipientEntry, trigger_create_for_recipients

TEST_KEY_PREFIX = "test:"


def workflow_test_send(
    *,
    workflow: Workflow | str,
    recipient_id: str,
    payload: dict[str, Any],
    actor: str,
    api_key: ApiKey | None = None,
    locale: str | None = None,
) -> TriggerInstance:
    """Start one test instance of ``workflow`` for the existing recipient
    ``recipient_id`` under a fresh idempotency key ``test:<uuid>``, through the normal
    trigger service (same checks, same dispatch after commit). Returns the new instance.

    ``locale``: the instance renders in it, over the recipient's and a push device's own
    (``executions.locales.send_locale``); None: as any send would choose.

    Raises NotFoundError (field ``recipient_id``) for an unknown recipient - a test
    never creates one -, 400 ``invalid_locale`` (field ``locale``) for a name Babel does
    not know, and the trigger service's ApplicationError for an unknown, inactive or
    empty workflow."""
    if locale is not None:
        locale_check(locale)
    if not Recipient.objects.filter(pk=recipient_id).exists():
        raise NotFoundError(
            code="not_found",
            field="recipient_id",
            message=f"recipient_id: no recipient {recipient_id!r}",
        )
    with transaction.atomic():
        result = trigger_create_for_recipients(
            workflow=workflow,
            idempotency_key=f"{TEST_KEY_PREFIX}{uuid.uuid4()}",
            payload=payload,
            recipients=[RecipientEntry(id=recipient_id)],
            actor=actor,
            api_key=api_key,
            test=True,
        )
        (created,) = result.instances
        if locale is not None:
            # In the creating transaction: its first step is dispatched on commit, so no
            # worker renders it without the locale.
            TriggerInstance.objects.filter(pk=created.id).update(locale=locale)
    return TriggerInstance.objects.select_related("workflow", "workflow_version").get(pk=created.id)
