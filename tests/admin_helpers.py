"""Users, groups and rows for the operator-console tests."""

from __future__ import annotations

import importlib
from datetime import timedelta

from django.apps import apps
from django.contrib.auth.models import Group, User
from django.utils import timezone

from executions.models import StepExecutionLog
from triggers.models import TriggerInstance, TriggerStatus, TriggerStatusChange

from .factories import TriggerInstanceFactory

PASSWORD = "correct horse battery staple"
_migration = importlib.import_module("workflows.migrations.0002_operators_group")
_people_migration = importlib.import_module("console.migrations.0001_operators_view_people")
_channel_data_migration = importlib.import_module(
    "console.migrations.0007_operators_view_channel_data"
)


def operators_group() -> Group:
    """The group the migration made. A transactional test flushes every table (the
    migration's rows included), so re-run the migration's idempotent function."""
    _migration.create_operators_group(apps, None)
    _people_migration.grant_view(apps, None)
    _channel_data_migration.grant_view(apps, None)
    return Group.objects.get(name=_migration.GROUP)


def make_operator(username: str = "olive") -> User:
    user = User.objects.create_user(username, password=PASSWORD, is_staff=True)
    user.groups.add(operators_group())
    return user


def make_superuser(username: str = "root") -> User:
    return User.objects.create_superuser(username, password=PASSWORD)


def failed_instance(error_kind: str = "permanent", **kwargs) -> TriggerInstance:
    """An instance whose SMS node failed (permanently unless ``error_kind`` says
    otherwise), with the rows the engine writes."""
    now = timezone.now()
    instance = TriggerInstanceFactory(
        status=TriggerStatus.FAILED,
        current_node_id="text",
        attempts=1,
        finished_at=now,
        last_error="node text: to: rendered to an empty phone number",
        **kwargs,
    )
    StepExecutionLog.objects.create(
        trigger=instance,
        workflow=instance.workflow,
        workflow_version=1,
        node_id="hello",
        node_type="email",
        attempt=1,
        started_at=now - timedelta(seconds=2),
        finished_at=now - timedelta(seconds=1),
        input_context={"payload": {}},
        output={"message_id": "<m1@example.com>", "to": "ada@example.com"},
        success=True,
    )
    StepExecutionLog.objects.create(
        trigger=instance,
        workflow=instance.workflow,
        workflow_version=1,
        node_id="text",
        node_type="sms",
        attempt=1,
        started_at=now - timedelta(milliseconds=500),
        finished_at=now,
        input_context={"payload": {}},
        output={},
        success=False,
        error="to: rendered to an empty phone number",
        error_kind=error_kind,
    )
    TriggerStatusChange.objects.create(
        instance=instance,
        from_status="processing",
        to_status="failed",
        reason="permanent error: node text",
        actor="engine",
    )
    return instance


def grant_edit_payload(user: User) -> User:
    """Give ``user`` "edit payload and retry" (the row triggers/migrations/0008 makes;
    re-created here because a transactional test flushes it)."""
    from django.contrib.auth.models import Permission
    from django.contrib.contenttypes.models import ContentType

    permission, _ = Permission.objects.get_or_create(
        content_type=ContentType.objects.get_for_model(TriggerInstance),
        codename="edit_payload_triggerinstance",
        defaults={"name": "Can edit the payload of a failed instance and retry it"},
    )
    user.user_permissions.add(permission)
    return User.objects.get(pk=user.pk)  # a fresh object: no stale permission cache
