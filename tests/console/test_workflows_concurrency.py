"""Operator console: a workflow's concurrency limit and key."""

from __future__ import annotations

import pytest

from tests.console.test_workflows import admin_client_, change_url, form_data, superuser
from tests.factories import WorkflowFactory, email_sms_definition
from workflows.concurrency import Concurrency

__all__ = ["admin_client_", "superuser"]  # fixtures

pytestmark = pytest.mark.django_db


def test_limit_and_key_are_saved_shown_and_cleared(admin_client_):
    workflow = WorkflowFactory(key="partner")
    data = form_data("partner", email_sms_definition())
    data.update(concurrency_limit="2", concurrency_key="{{ payload.tenant }}")
    response = admin_client_.post(change_url(workflow), data)
    assert response.status_code == 302, response.content.decode()[:3000]
    workflow.refresh_from_db()
    assert (workflow.concurrency_limit, workflow.concurrency_key) == (2, "{{ payload.tenant }}")
    assert workflow.current_version.version == 1  # settings are no new version

    page = admin_client_.get(change_url(workflow)).content.decode()
    assert 'name="concurrency_limit"' in page and 'value="2"' in page

    cleared = form_data("partner", email_sms_definition())
    cleared.update(concurrency_limit="", concurrency_key="")  # what the browser posts
    assert admin_client_.post(change_url(workflow), cleared).status_code == 302
    workflow.refresh_from_db()
    assert (workflow.concurrency_limit, workflow.concurrency_key) == (None, "")


@pytest.mark.parametrize(
    ("limit", "key", "says"),
    [
        ("2", "{{ payload.tenant ", "invalid Liquid template"),
        ("2", "{{ recipient.email }}", "recipient.email is not known"),
        ("", "{{ payload.tenant }}", "needs a limit"),
    ],
)
def test_a_bad_key_is_a_form_error_and_saves_nothing(admin_client_, limit, key, says):
    workflow = WorkflowFactory(key="partner", concurrency=Concurrency(limit=5))
    data = form_data("partner", email_sms_definition())
    data.update(concurrency_limit=limit, concurrency_key=key)
    response = admin_client_.post(change_url(workflow), data)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors["concurrency_key"]
    assert any(says in error for error in errors), errors
    workflow.refresh_from_db()
    assert (workflow.concurrency_limit, workflow.concurrency_key) == (5, "")


def test_a_limit_below_one_is_a_form_error(admin_client_):
    workflow = WorkflowFactory(key="partner")
    data = form_data("partner", email_sms_definition())
    data.update(concurrency_limit="0")
    response = admin_client_.post(change_url(workflow), data)
    assert response.status_code == 200
    assert "concurrency_limit" in response.context["adminform"].form.errors
