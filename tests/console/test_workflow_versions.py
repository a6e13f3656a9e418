"""Operator console: a workflow's versions on its page (message, author, links), the diff
between any two versions, and "restore as new version" behind a confirmation that only
a POST with the permission to change workflows acts on."""

from __future__ import annotations

import re

import pytest
from django.contrib.admin.models import LogEntry
from django.http import HttpRequest
from django.test import Client
from django.urls import reverse

from tests.admin_helpers import PASSWORD, make_operator, make_superuser
from tests.factories import WorkflowFactory, email_sms_definition
from workflows.models import Workflow, WorkflowVersion
from workflows.services import workflow_save

pytestmark = pytest.mark.django_db


def logged_in(user, **client_options) -> Client:
    client = Client(**client_options)
    client.login(request=HttpRequest(), username=user.username, password=PASSWORD)
    return client


@pytest.fixture
def superuser():
    return make_superuser()


@pytest.fixture
def admin_client_(superuser) -> Client:
    return logged_in(superuser)


@pytest.fixture
def operator_client() -> Client:
    """Staff who may view workflows but not change them."""
    return logged_in(make_operator())


@pytest.fixture
def workflow() -> Workflow:
    """v1 plain, v2 with a one-hour wait (by ann), v3 with a five-minute wait (by bob)."""
    WorkflowFactory(key="welcome", name="Welcome")
    for delay, actor, message in (("1h", "ann", "wait an hour"), ("5m", "bob", "shorter")):
        saved = workflow_save(
            key="welcome",
            name="Welcome",
            definition=email_sms_definition(delay=delay),
            actor=actor,
            message=message,
        )
    return saved


def change_url(workflow: Workflow) -> str:
    return reverse("admin:workflows_workflow_change", args=[workflow.pk])


def diff_url(workflow: Workflow) -> str:
    return reverse("admin:workflows_workflow_versions_diff", args=[workflow.pk])


def restore_url(workflow: Workflow, version: int) -> str:
    return reverse("admin:workflows_workflow_version_restore", args=[workflow.pk, version])


def test_the_page_lists_versions_newest_first_with_message_author_and_links(
    admin_client_, workflow
):
    body = admin_client_.get(change_url(workflow)).content.decode()
    assert re.findall(r'<td class="field-version">\s*<p>(\d+)</p>', body) == ["3", "2", "1"]
    messages_shown = re.findall(r'<td class="field-message">\s*<p>([^<]*)</p>', body)
    assert messages_shown == ["shorter", "wait an hour", "-"]
    assert re.findall(r'<td class="field-created_by">\s*<p>([^<]*)</p>', body)[:2] == [
        "bob",
        "ann",
    ]
    assert f'href="{diff_url(workflow)}?old=2&amp;new=3"' in body
    assert f'href="{restore_url(workflow, 1)}"' in body
    assert f'href="{restore_url(workflow, 3)}"' not in body  # the current one: no restore
    assert 'id="nf-versions-diff"' in body


def test_an_operator_sees_the_history_and_diffs_but_no_restore(operator_client, workflow):
    body = operator_client.get(change_url(workflow)).content.decode()
    assert f'href="{diff_url(workflow)}?old=2&amp;new=3"' in body
    assert "nf-version-restore" not in body
    assert operator_client.get(diff_url(workflow)).status_code == 200
    assert operator_client.get(restore_url(workflow, 1)).status_code == 403
    assert operator_client.post(restore_url(workflow, 1)).status_code == 403
    assert workflow.versions.count() == 3


def test_the_diff_page_compares_the_current_version_with_the_one_before_by_default(
    admin_client_, workflow
):
    body = admin_client_.get(diff_url(workflow)).content.decode()
    assert '<option value="2" selected>v2 — wait an hour</option>' in body
    assert '<option value="3" selected>v3 — shorter</option>' in body
    assert '<span class="nf-diff-del">-        &quot;duration&quot;: &quot;1h&quot;</span>' in body
    assert '<span class="nf-diff-add">+        &quot;duration&quot;: &quot;5m&quot;</span>' in body


def test_the_diff_page_compares_any_two_chosen_versions(admin_client_, workflow):
    body = admin_client_.get(diff_url(workflow), {"old": 3, "new": 1}).content.decode()
    assert '<span class="nf-diff-file">--- welcome v3</span>' in body
    assert '<span class="nf-diff-del">-      &quot;id&quot;: &quot;wait&quot;,</span>' in body
    assert "nf-diff-add" not in body.split('id="nf-diff"', 1)[1]


def test_one_version_on_both_sides_shows_its_whole_definition(admin_client_, workflow):
    body = admin_client_.get(diff_url(workflow), {"old": 1, "new": 1}).content.decode()
    assert '<span class="nf-diff-file">--- /dev/null</span>' in body
    assert "nf-diff-del" not in body.split('id="nf-diff"', 1)[1]


def test_a_version_the_workflow_lacks_is_a_form_error_not_a_500(admin_client_, workflow):
    response = admin_client_.get(diff_url(workflow), {"old": 9, "new": "x"})
    assert response.status_code == 200
    assert set(response.context["form"].errors) == {"old", "new"}
    assert 'id="nf-diff"' not in response.content.decode()


def test_the_confirmation_shows_what_restoring_changes_and_a_get_restores_nothing(
    admin_client_, workflow
):
    response = admin_client_.get(restore_url(workflow, 1))
    assert response.status_code == 200
    body = response.content.decode()
    assert '<span class="nf-diff-file">--- welcome v3</span>' in body
    assert '<span class="nf-diff-file">+++ welcome v1</span>' in body
    assert 'id="nf-confirm-restore"' in body and "csrfmiddlewaretoken" in body
    assert workflow.versions.count() == 3


def test_confirming_restores_as_a_new_version_and_logs_it(superuser, admin_client_, workflow):
    response = admin_client_.post(restore_url(workflow, 1))
    assert response.status_code == 302 and response["Location"] == change_url(workflow)
    workflow.refresh_from_db()
    new = workflow.current_version
    assert (new.version, new.message, new.created_by) == (4, "restored from v1", "root")
    assert new.definition == workflow.versions.get(version=1).definition
    entry = LogEntry.objects.get(object_id=str(workflow.pk))
    assert entry.change_message == "Restored v1 as v4" and entry.user == superuser
    page = admin_client_.get(change_url(workflow)).content.decode()
    assert "Restored v1 as the new current version v4" in page


def test_a_restore_post_without_the_csrf_token_is_refused(superuser, workflow):
    client = logged_in(superuser, enforce_csrf_checks=True)
    assert client.post(restore_url(workflow, 1)).status_code == 403
    assert workflow.versions.count() == 3


def test_restoring_the_current_definition_says_so_and_adds_nothing(admin_client_, workflow):
    body = admin_client_.get(restore_url(workflow, 3)).content.decode()
    assert 'id="nf-restore-unchanged"' in body and 'id="nf-confirm-restore"' not in body
    response = admin_client_.post(restore_url(workflow, 3), follow=True)
    assert "Not restored" in response.content.decode()
    assert WorkflowVersion.objects.filter(workflow=workflow).count() == 3


def test_an_unknown_version_goes_back_to_the_workflow_with_the_reason(admin_client_, workflow):
    response = admin_client_.get(restore_url(workflow, 9), follow=True)
    assert response.redirect_chain[-1][0] == change_url(workflow)
    assert "has no version 9" in response.content.decode()
