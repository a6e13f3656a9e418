"""``manage.py translations extract``: the keys each workflow's templates use, and with
``--locale`` those that locale lacks."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from tests.factories import email_definition
from translations.services import catalogue_put
from workflows.services import workflow_save

pytestmark = pytest.mark.django_db


def test_extract_lists_keys_per_workflow_and_what_a_locale_lacks():
    catalogue_put(locale="en", namespace="common", messages={"a": "A", "b": "B"})
    catalogue_put(locale="fr", namespace="welcome", messages={"a": "Á"})
    workflow_save(
        key="welcome", name="W", definition=email_definition('{{ "b" | t }}{{ "a" | t }}')
    )
    workflow_save(key="plain", name="P", definition=email_definition("no keys"))
    out = StringIO()
    call_command("translations", "extract", "--locale", "fr", stdout=out)
    assert json.loads(out.getvalue()) == {"welcome": {"keys": ["a", "b"], "missing": ["b"]}}
