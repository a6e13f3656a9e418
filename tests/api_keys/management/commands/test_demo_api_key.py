"""``manage.py demo_api_key`` (``make run``): the demo's key is created once, kept in the
env file and reused while active, replaced once revoked; the file's other lines stay."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from dotenv import dotenv_values

from api_keys.models import ApiKey
from api_keys.services import api_key_revoke

pytestmark = pytest.mark.django_db


def test_demo_api_key_is_created_once_kept_and_replaced_when_revoked(tmp_path, capsys):
    env_file = tmp_path / ".env"
    env_file.write_text("DJANGO_ALLOWED_HOSTS='localhost'\n")

    def demo_key() -> str:
        call_command("demo_api_key", "--env-file", str(env_file))
        return capsys.readouterr().out.strip().splitlines()[-1]

    first = demo_key()
    assert demo_key() == first
    assert ApiKey.objects.count() == 1
    saved = dotenv_values(env_file)
    assert saved == {"DJANGO_ALLOWED_HOSTS": "localhost", "NOTIFYFLOW_DEMO_API_KEY": first}

    api_key_revoke(api_key=ApiKey.objects.get())
    replaced = demo_key()
    assert replaced != first
    assert dotenv_values(env_file)["NOTIFYFLOW_DEMO_API_KEY"] == replaced
    assert ApiKey.objects.filter(revoked_at__isnull=True).count() == 1
