from __future__ import annotations

import pytest

from tests.factories import WorkflowFactory
from workflows.concurrency import (
    MAX_KEY_LENGTH,
    NO_LIMIT,
    Concurrency,
    key_render,
    key_template_problem,
)
from workflows.services import workflow_save


@pytest.mark.parametrize(
    "source",
    [
        "",
        "{{ payload.tenant }}",
        "{{ payload.account.id }}-{{ recipient.id }}",
        "{{ trigger.idempotency_key | split: ':' | first }}",
        "{{ workflow.key }}",
        "{% if payload.vip %}vip{% else %}{{ payload.tenant | default: 'none' }}{% endif %}",
    ],
)
def test_key_templates_over_what_creation_knows_are_accepted(source):
    assert key_template_problem(source) is None


@pytest.mark.parametrize(
    ("source", "says"),
    [
        ("{{ payload.tenant ", "invalid Liquid template"),
        ("{{ payload.tenant | nope }}", "unknown filter"),
        ("{{ recipient.email }}", "recipient.email is not known"),
        ("{{ trigger.id }}", "trigger.id is not known"),
        ("{{ vars.x }}", "vars.x is not known"),
        ("{{ now }}", "now is not known"),
        ("x" * 501, "at most 500 characters"),
    ],
)
def test_key_templates_that_cannot_render_at_creation_are_refused(source, says):
    problem = key_template_problem(source)
    assert problem is not None and says in problem


def _render(template: str, payload: dict, recipient_id: str | None = None) -> str:
    return key_render(
        template=template,
        payload=payload,
        idempotency_key="order-7",
        workflow_key="reminders",
        recipient_id=recipient_id,
    )


def test_key_renders_over_payload_recipient_trigger_and_workflow():
    template = (
        "{{ workflow.key }}/{{ payload.tenant }}/{{ recipient.id }}/{{ trigger.idempotency_key }}"
    )
    assert _render(template, {"tenant": "acme"}, "r-1") == "reminders/acme/r-1/order-7"


def test_no_template_is_the_workflow_wide_key():
    assert _render("", {"tenant": "acme"}) == ""


def test_a_key_that_does_not_render_takes_the_workflow_wide_key(caplog):
    assert _render("{{ payload.tenant }}", {}) == ""
    assert "does not render" in caplog.text


def test_long_keys_are_cut_to_the_column_and_stripped():
    assert _render("  {{ payload.tenant }}  ", {"tenant": "a" * 300}) == "a" * MAX_KEY_LENGTH
    assert _render("  {{ payload.tenant }}  ", {"tenant": "acme"}) == "acme"


@pytest.mark.django_db
def test_the_service_sets_keeps_and_removes_a_limit():
    workflow = WorkflowFactory(concurrency=Concurrency(limit=2, key="{{ payload.tenant }}"))
    assert (workflow.concurrency_limit, workflow.concurrency_key) == (2, "{{ payload.tenant }}")
    assert workflow.concurrency_key_template == "{{ payload.tenant }}"
    kept = workflow_save(
        key=workflow.key, name="n", definition=workflow.definition, workflow=workflow
    )
    assert (kept.concurrency_limit, kept.concurrency_key) == (2, "{{ payload.tenant }}")
    removed = workflow_save(
        key=workflow.key,
        name="n",
        definition=workflow.definition,
        workflow=workflow,
        concurrency=NO_LIMIT,
    )
    removed.refresh_from_db()
    assert (removed.concurrency_limit, removed.concurrency_key) == (None, "")
    assert removed.concurrency_key_template is None
