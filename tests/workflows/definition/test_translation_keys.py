"""Saving a workflow whose templates use a translation key the default locale lacks is
refused, naming node, field and key."""

from __future__ import annotations

import pytest

from tests.factories import email_definition
from translations.services import catalogue_put
from workflows.definition import DefinitionError
from workflows.models import Workflow
from workflows.services import workflow_save

pytestmark = pytest.mark.django_db

BODY = '{{ "welcome.body" | t }} {{ "welcome.sign" | t }}'


def test_key_missing_from_the_default_locale_is_refused_naming_node_field_and_key():
    catalogue_put(locale="en", namespace="welcome", messages={"welcome": {"body": "Hi"}})
    catalogue_put(locale="fr", namespace="welcome", messages={"welcome": {"sign": "Bise"}})
    with pytest.raises(DefinitionError) as caught:
        workflow_save(key="welcome", name="Welcome", definition=email_definition(BODY))
    [problem] = caught.value.errors
    assert (problem.node, problem.field, problem.code) == (
        "mail",
        "nodes[0].config.body",
        "translation_missing",
    )
    assert "'welcome.sign'" in problem.message
    assert not Workflow.objects.exists()


def test_keys_found_in_the_namespace_or_common_are_accepted():
    catalogue_put(locale="en", namespace="welcome", messages={"welcome": {"body": "Hi"}})
    catalogue_put(locale="en", namespace="common", messages={"welcome": {"sign": "Bye"}})
    assert workflow_save(key="welcome", name="Welcome", definition=email_definition(BODY))


def test_the_workflow_default_locale_is_the_one_checked():
    catalogue_put(
        locale="fr", namespace="welcome", messages={"welcome": {"body": "Salut", "sign": "Bise"}}
    )
    with pytest.raises(DefinitionError):
        workflow_save(key="welcome", name="Welcome", definition=email_definition(BODY))
    saved = workflow_save(
        key="welcome", name="Welcome", definition=email_definition(BODY), default_locale="fr"
    )
    assert saved.default_locale == "fr"
