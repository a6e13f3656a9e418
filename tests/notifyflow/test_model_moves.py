"""Models that moved app (API keys, the gates' tables, the feed's) keep their rows, their
content types and the operators' grants on a database filled before the move: the
migrations move Django's state only, and the content types with it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from api_keys.models import ApiKey
from feed.models import FeedCounter
from gates.models import ThrottleCounter

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_databases]

# Before the moves: the new apps unapplied, so the models live in their old apps again.
BEFORE_THE_MOVES = [("api_keys", None), ("gates", None), ("feed", None)]
MOVED = {
    ("triggers", "apikey"): "api_keys",
    ("triggers", "throttlecounter"): "gates",
    ("triggers", "batch"): "gates",
    ("executions", "feeditem"): "feed",
    ("executions", "feedcounter"): "feed",
}


def _migrate(targets):
    """Migrate to ``targets`` (None: the latest); the state the database is then in."""
    executor = MigrationExecutor(connection)
    executor.migrate(targets or executor.loader.graph.leaf_nodes())
    executor.loader.build_graph()
    return executor.loader.project_state(list(executor.loader.applied_migrations), at_end=True)


def _fill_before_the_moves(apps) -> dict[str, int]:
    """Rows and grants as a database upgraded from before the moves holds them."""
    key = apps.get_model("triggers", "ApiKey").objects.create(
        name="billing", scope="trigger", prefix="nf_abc", key_hash="a" * 64
    )
    counter = apps.get_model("triggers", "ThrottleCounter").objects.create(
        scope="recipient",
        subject="p-1",
        key="k",
        hits=[1],
        limit=3,
        window_ms=60_000,
        updated_at=datetime(2026, 1, 1, tzinfo=UTC),
    )
    recipient = apps.get_model("recipients", "Recipient").objects.create(id="p-1")
    apps.get_model("executions", "FeedCounter").objects.create(
        recipient=recipient, unread_count=2, unseen_count=1
    )
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    group = apps.get_model("auth", "Group").objects.get_or_create(name="operators")[0]
    type_ids = {}
    for (app_label, model), new_app in MOVED.items():
        # Before the moves there was no content type under the new label.
        ContentType.objects.filter(app_label=new_app, model=model).delete()
        content_type, _ = ContentType.objects.get_or_create(app_label=app_label, model=model)
        type_ids[model] = content_type.pk
        permission, _ = Permission.objects.get_or_create(
            content_type=content_type, codename=f"view_{model}", defaults={"name": model}
        )
        group.permissions.add(permission)
    return {"key": key.pk, "counter": counter.pk, **type_ids}


def test_moved_models_keep_their_rows_content_types_and_grants():
    from django.contrib.auth.models import Group
    from django.contrib.contenttypes.models import ContentType

    try:
        before = _fill_before_the_moves(_migrate(BEFORE_THE_MOVES).apps)
        _migrate(None)
    finally:
        _migrate(None)  # never leave the test database behind the code
    ContentType.objects.clear_cache()

    assert ApiKey.objects.get(pk=before["key"]).name == "billing"
    assert ThrottleCounter.objects.get(pk=before["counter"]).hits == [1]
    assert FeedCounter.objects.get(recipient_id="p-1").unread_count == 2
    granted = set(
        Group.objects.get(name="operators").permissions.values_list(
            "content_type__app_label", "codename"
        )
    )
    for (old_app, model), new_app in MOVED.items():
        moved = ContentType.objects.get(app_label=new_app, model=model)
        # The same row, relabelled: every permission and admin log entry still points at it.
        assert moved.pk == before[model]
        assert not ContentType.objects.filter(app_label=old_app, model=model).exists()
        assert (new_app, f"view_{model}") in granted


def test_the_operators_view_the_moved_models_when_their_grants_ran_after_the_move():
    """On a fresh database the old grants may run after the move and find nothing under
    the old label: the last grant gives the operators the moved models all the same."""
    from django.contrib.auth.models import Group

    try:
        apps = _migrate(BEFORE_THE_MOVES).apps
        apps.get_model("auth", "Group").objects.filter(name="operators").delete()
        _migrate(None)
    finally:
        _migrate(None)

    granted = set(
        Group.objects.get(name="operators").permissions.values_list(
            "content_type__app_label", "codename"
        )
    )
    for (_, model), new_app in MOVED.items():
        assert (new_app, f"view_{model}") in granted
