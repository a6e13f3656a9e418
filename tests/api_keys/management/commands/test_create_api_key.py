"""``manage.py create_api_key``: prints the raw key as its last line (a script takes it
from there), with the scope and workflows asked for."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from api_keys.models import ApiKey

pytestmark = pytest.mark.django_db


def test_create_api_key_command_prints_key_last():
    out = StringIO()
    call_command("create_api_key", "ci", stdout=out, stderr=StringIO())
    raw = out.getvalue().strip().splitlines()[-1]
    assert ApiKey.objects.get(key_hash=ApiKey.hash_key(raw)).name == "ci"


def test_create_api_key_command_takes_a_scope(capsys):
    call_command("create_api_key", "svc", "--scope", "trigger", "--workflow", "welcome")
    raw = capsys.readouterr().out.strip().splitlines()[-1]
    key = ApiKey.objects.get(key_hash=ApiKey.hash_key(raw))
    assert key.scope == "trigger" and key.workflows == ["welcome"]
