"""A URL a template puts in front of a person (``in_app.url``, issue 39 item 4) is an
http(s) URL or a relative path: ``javascript:``, ``data:`` and any other scheme are
refused at save when the template's text fixes the scheme (``invalid_url`` naming node
and field); a rendered one is refused when the step runs
(tests/executions/nodes/test_in_app.py)."""

from __future__ import annotations

import pytest

from tests.factories import in_app_definition
from workflows.definition import DefinitionError, validate_definition
from workflows.definition.links import link_problem, link_template_problem

REFUSED = [
    "javascript:alert(document.cookie)",
    "JavaScript:alert(1)",
    "  javascript:alert(1)",
    "data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==",
    "vbscript:msgbox(1)",
    "file:///etc/passwd",
    "mailto:someone@example.com",
    "java\tscript:alert(1)",  # browsers drop tabs and newlines from a URL
    "java\nscript:alert(1)",
    "//evil.example.com/path",
    "\\\\evil.example.com",
    "https:evil.example.com",
    "https://",
    "https://app.example.com/\u202egpj.exe",
]
ACCEPTED = [
    "",
    "https://app.example.com/c/42",
    "HTTP://app.example.com",
    "/orders/42",
    "orders/42?tab=a:b",
    "?page=2",
    "#comments",
    "https://app.example.com/search?q=a:b#x",
]


def problems(definition) -> list[tuple]:
    with pytest.raises(DefinitionError) as info:
        validate_definition(definition)
    return [(p.node, p.field, p.code) for p in info.value.errors]


@pytest.mark.parametrize("url", REFUSED)
def test_a_literal_url_that_is_not_http_or_relative_is_refused_at_save(url):
    assert link_problem(url) is not None
    assert problems(in_app_definition(url=url)) == [("bell", "nodes[0].config.url", "invalid_url")]


@pytest.mark.parametrize("url", ACCEPTED)
def test_http_urls_and_relative_paths_are_accepted(url):
    assert link_problem(url) is None
    assert validate_definition(in_app_definition(url=url))


@pytest.mark.parametrize(
    "template",
    [
        "javascript:{{ payload.code }}",
        " data:{{ payload.html }}",
        "vbscript:x{% if x %}{% endif %}",
    ],
)
def test_a_template_whose_text_fixes_a_bad_scheme_is_refused_at_save(template):
    assert link_template_problem(template) is not None
    assert problems(in_app_definition(url=template)) == [
        ("bell", "nodes[0].config.url", "invalid_url")
    ]


@pytest.mark.parametrize(
    "template",
    [
        "{{ payload.url }}",
        "https://{{ payload.host }}/c/1",
        "/c/{{ payload.id }}",
        "{{ payload.a }}:{{ payload.b }}",
    ],
)
def test_a_template_whose_scheme_comes_from_data_is_left_to_the_run(template):
    assert link_template_problem(template) is None
    assert validate_definition(in_app_definition(url=template))


@pytest.mark.django_db
def test_the_api_refuses_a_javascript_url_at_save_naming_node_and_field(api):
    body = {
        "key": "xss",
        "name": "XSS",
        "definition": in_app_definition(url="javascript:alert(document.cookie)"),
    }
    response = api.post("/api/v1/workflows/", body, format="json")
    assert response.status_code == 400, response.content
    assert (response.json()["code"], response.json()["field"]) == (
        "invalid_url",
        "definition.nodes[0].config.url",
    )
    assert "bell" in response.json()["message"]
