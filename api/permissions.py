"""Scopes of API keys (docs/api.md#authentication-scopes-and-replays), applied per view.

A view declares ``required_scope``: a mapping of HTTP method to one of the access levels
below (missing methods: ``read`` for GET/HEAD/OPTIONS, ``admin`` for the rest). A key
out of scope gets 403 ``permission_denied``. A key limited to workflows (``ApiKey.
workflows``) sees and acts on only those: views filter with ``visible_instances`` and
check with ``require_workflow``; the people endpoints refuse it
(``NotLimitedToWorkflows``).
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from rest_framework import exceptions, permissions
from rest_framework.request import Request

from api_keys.models import ApiKey, ApiKeyScope
from triggers.models import TriggerInstance

Scope = ApiKeyScope

# Access level -> the key scopes that have it.
LEVELS: dict[str, frozenset[str]] = {
    # Read anything.
    "read": frozenset({Scope.READ, Scope.ADMIN}),
    # Create triggers, post events.
    "trigger": frozenset({Scope.TRIGGER, Scope.ADMIN}),
    # Read instances: a trigger key sees only those it created (visible_instances).
    "read_own": frozenset({Scope.TRIGGER, Scope.READ, Scope.ADMIN}),
    # Change workflows and bindings, act on instances.
    "admin": frozenset({Scope.ADMIN}),
}
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


def required_level(view: Any, method: str) -> str:
    declared: dict[str, str] = getattr(view, "required_scope", {})
    return declared.get(method, "read" if method in SAFE_METHODS else "admin")


class HasScope(permissions.BasePermission):
    """The key's scope grants the view's required level for this method."""

    def has_permission(self, request: Request, view: Any) -> bool:
        key = request.user
        if not isinstance(key, ApiKey):
            return False
        level = required_level(view, request.method or "GET")
        if key.scope not in LEVELS[level]:
            raise exceptions.PermissionDenied(
                f"API key scope {key.scope!r} may not {request.method} here "
                f"(needs {' or '.join(sorted(LEVELS[level]))})"
            )
        return True


class NotLimitedToWorkflows(permissions.BasePermission):
    """The people endpoints: recipients, lists and their members, preferences,
    channel data, feed tokens, erasure. A person is not any workflow's, so a key limited
    to workflows (``ApiKey.workflows``) - which acts only through its workflows: it
    triggers them (inline recipients included) and reads what it created - gets 403
    ``permission_denied`` here, whatever its scope. Every people view lists it:
    ``PEOPLE_PERMISSIONS``."""

    def has_permission(self, request: Request, view: Any) -> bool:
        key = request.user
        if isinstance(key, ApiKey) and key.workflows:
            raise exceptions.PermissionDenied(
                "an API key limited to workflows acts only through them (triggers, its "
                "instances); recipients, lists, preferences and feed tokens need a key that "
                "is not limited to workflows"
            )
        return True


# The permissions of a people endpoint: authenticated, in scope, not limited to workflows.
PEOPLE_PERMISSIONS = [permissions.IsAuthenticated, HasScope, NotLimitedToWorkflows]


def visible_instances(queryset: QuerySet, key: ApiKey, *, prefix: str = "") -> QuerySet:
    """``queryset`` (of instances, or of rows reached through ``prefix``, e.g.
    ``trigger__``) narrowed to what ``key`` may read (``ApiKey.may_read`` for one row)."""
    if key.scope == Scope.TRIGGER:
        queryset = queryset.filter(**{f"{prefix}created_by_key": key.name})
    if key.workflows:
        queryset = queryset.filter(**{f"{prefix}workflow__key__in": key.workflows})
    return queryset


def is_restricted(key: ApiKey) -> bool:
    """Whether ``key`` sees only part of the instances (trigger scope or a workflow list)."""
    return key.scope == Scope.TRIGGER or bool(key.workflows)


def require_visible_instance(
    key: ApiKey, instance_id: Any, *, only_if_restricted: bool = False
) -> None:
    """404 unless the instance exists and ``key`` may see it (a trigger key: only those it
    created; a key limited to workflows: only theirs). ``only_if_restricted``: the caller
    answers 404 for an unknown id itself, so an unrestricted key costs no query here."""
    if only_if_restricted and not is_restricted(key):
        return
    get_object_or_404(visible_instances(TriggerInstance.objects.only("id"), key), pk=instance_id)


def visible_workflows(queryset: QuerySet, key: ApiKey, *, field: str = "key") -> QuerySet:
    """``queryset`` narrowed to the workflows ``key`` is limited to (if any)."""
    if key.workflows:
        queryset = queryset.filter(**{f"{field}__in": key.workflows})
    return queryset


def require_workflow(key: ApiKey, workflow_key: str) -> None:
    """403 unless ``key`` may use workflow ``workflow_key``."""
    if not key.allows_workflow(workflow_key):
        raise exceptions.PermissionDenied(f"API key may not use workflow {workflow_key!r}")


def actor(key: Any) -> str:
    """The audited actor of an API call: ``api:<key name>``."""
    return f"api:{getattr(key, 'name', key)}"
