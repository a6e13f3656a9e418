"""Filters that can amplify their input (join, replace, append, split, times, ...) are
bounded before they allocate: a template that would build more than the output limit
fails at once with the template-limit error - a permanent failure naming the node in a
worker, a 400 from preview - instead of building it."""

from __future__ import annotations

import time
import tracemalloc

import pytest
from django.core import mail
from rest_framework.test import APIClient

from api_keys.services import api_key_create
from executions import engine
from executions.outcomes import StepOutcome
from tests.factories import TriggerInstanceFactory, WorkflowFactory, email_definition
from triggers.models import TriggerStatus
from workflows.templating import TemplateLimitError, render

pytestmark = pytest.mark.django_db

# len(s)² characters from one payload string: 256 MB from 16 KB.
QUADRATIC = '{{ payload.s | split: "" | join: payload.s }}'
SIXTEEN_KB = "x" * 16 * 1024


def _rendered_within_limits(source: str, context: dict) -> float:
    """Render ``source``, expecting the template-limit error; the peak memory (MB)."""
    tracemalloc.start()
    try:
        with pytest.raises(TemplateLimitError):
            render(source, context)
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def test_quadratic_join_fails_the_instance_permanently_fast_naming_the_node(dispatched):
    instance = TriggerInstanceFactory(
        workflow=WorkflowFactory(definition=email_definition(QUADRATIC, to="ada@example.com")),
        payload={"s": SIXTEEN_KB},
    )
    started = time.monotonic()
    tracemalloc.start()
    try:
        assert engine.step_execute(instance_id=instance.pk) == StepOutcome.FAILED_PERMANENT
        peak_mb = tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()
    assert time.monotonic() - started < 5  # a loaded CI machine; the memory says more
    assert peak_mb < 16  # not the 256 MB string
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.FAILED and instance.attempts == 1
    assert instance.last_error.startswith("node mail: body: template error:")
    assert "limit" in instance.last_error
    assert mail.outbox == []


def test_quadratic_join_through_preview_with_a_read_key_is_a_400_fast():
    workflow = WorkflowFactory(definition=email_definition(QUADRATIC, to="ada@example.com"))
    reader = APIClient()
    reader.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key_create(name='r', scope='read')[1]}")
    started = time.monotonic()
    response = reader.post(
        f"/api/v1/workflows/{workflow.key}/preview/",
        {"payload": {"s": SIXTEEN_KB}},
        format="json",
    )
    assert time.monotonic() - started < 5  # a loaded CI machine; the memory says more
    assert response.status_code == 400, response.json()
    assert "limit" in response.json()["message"]


@pytest.mark.parametrize(
    "source",
    [
        QUADRATIC,
        '{{ payload.s | replace: "x", payload.s }}',
        '{{ payload.s | replace: "", payload.s }}',
        '{% assign parts = payload.s | split: "" %}{{ parts | join: payload.s | size }}',
        "{% assign a = payload.s | split: '' %}{% for i in (1..30) %}"
        "{% assign a = a | concat: a %}{% endfor %}{{ a | size }}",
        "{% assign t = payload.s %}{% for i in (1..30) %}"
        "{% assign t = t | append: t %}{% endfor %}{{ t | size }}",
        "{% assign t = payload.s %}{% for i in (1..30) %}"
        "{% assign t = t | prepend: t | replace_first: 'x', t %}{% endfor %}{{ t | size }}",
        "{% assign n = 3 %}{% for i in (1..40) %}{% assign n = n | times: n %}{% endfor %}"
        "{{ n | modulo: 7 }}",
        "{{ (1..100000000) | reverse | first }}",
        "{{ (1..100000000) | slice: 0, 100000000 | size }}",
        "{% assign t = payload.s %}{% for i in (1..30) %}"
        "{% assign t = t | escape | url_encode %}{% endfor %}{{ t | size }}",
    ],
    ids=[
        "join",
        "replace",
        "replace-empty",
        "join-size",
        "concat",
        "append",
        "prepend",
        "times",
        "range",
        "slice",
        "escape",
    ],
)
def test_amplifying_filters_stop_at_the_limit_before_allocating(settings, source):
    settings.NOTIFYFLOW_TEMPLATE_OUTPUT_LIMIT = 64 * 1024
    started = time.monotonic()
    peak_mb = _rendered_within_limits(source, {"payload": {"s": "x&" * 4 * 1024}})
    assert time.monotonic() - started < 5  # a loaded CI machine; the memory says more
    assert peak_mb < 16


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('{{ "a,b,c" | split: "," | join: "-" }}', "a-b-c"),
        ('{{ "banana" | replace: "a", "o" }}', "bonono"),
        ('{{ "ab" | replace: "", "-" }}', "-a-b-"),
        ('{{ "x" | append: "y" | prepend: "w" }}', "wxy"),
        ('{{ "a b a" | replace_first: "a", "c" | replace_last: "a", "d" }}', "c b d"),
        ("{{ 6 | times: 7 }}", "42"),
        ("{{ (1..5) | reverse | join: '' }}", "54321"),
        ("{{ (1..1000000) | size }}", "1000000"),
        ("{% assign a = 'a,b' | split: ',' %}{{ a | concat: a | join }}", "a b a b"),
        ('{{ "<b>" | escape }}', "&lt;b&gt;"),
    ],
)
def test_filters_within_the_limit_behave_as_liquid_says(source, expected):
    assert render(source, {}) == expected


@pytest.mark.parametrize(
    "source",
    [
        "{{ payload.missing | default: 'EUR' }}",
        "{{ payload.missing | default: 'EUR' | upcase }}",
    ],
)
def test_bounded_filters_still_let_default_fill_a_missing_field(source):
    assert render(source, {"payload": {}}) == "EUR"
