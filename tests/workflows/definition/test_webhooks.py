"""The webhook node's URL at save: its host (and port) must be allowed by
NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS - a bare host allows only the web ports, a host with a
port that port only - and a templated host, which cannot be checked, is refused."""

from __future__ import annotations

import pytest

from tests.executions.nodes.test_webhook import webhook_definition
from workflows.definition import DefinitionError
from workflows.services import workflow_save

pytestmark = pytest.mark.django_db


def test_host_outside_the_allow_list_is_refused_at_save(settings):
    settings.NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS = ["hooks.example.com"]
    with pytest.raises(DefinitionError) as info:
        workflow_save(key="evil", name="evil", definition=webhook_definition("http://10.0.0.5/x"))
    assert info.value.code == "host_not_allowed"
    assert info.value.field == "definition.nodes[0].config.url"
    # A templated host cannot be checked at save, so it is refused too.
    with pytest.raises(DefinitionError) as templated:
        workflow_save(
            key="evil2", name="evil", definition=webhook_definition("http://{{ payload.h }}/x")
        )
    assert templated.value.code == "invalid_url"


def test_a_bare_host_allows_only_the_web_ports(settings):
    settings.NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS = ["localhost", "*.example.com"]
    for url in ("http://localhost:5432/", "http://localhost:6379/", "https://a.example.com:22/"):
        with pytest.raises(DefinitionError) as info:
            workflow_save(key="w", name="w", definition=webhook_definition(url))
        assert info.value.code == "host_not_allowed", url
        assert "port" in info.value.message
    for url in ("http://localhost/x", "https://localhost:443/x", "https://a.example.com/x"):
        workflow_save(key="w", name="w", definition=webhook_definition(url))


def test_a_host_with_a_port_allows_that_port_only(settings):
    settings.NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS = ["hooks.internal:8080", "*.example.com:8443"]
    for url in ("http://hooks.internal:8080/x", "https://a.example.com:8443/x"):
        workflow_save(key="w", name="w", definition=webhook_definition(url))
    for url in ("http://hooks.internal/x", "http://hooks.internal:5432/x"):
        with pytest.raises(DefinitionError) as info:
            workflow_save(key="w", name="w", definition=webhook_definition(url))
        assert info.value.code == "host_not_allowed", url
