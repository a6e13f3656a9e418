"""PII controls (issue 12 item 4): step logs without a copy of the payload, redaction
paths in logs, API and admin, purge_finished, console backends refused in production."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.http import HttpRequest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from executions import engine
from executions.models import Delivery, StepExecutionLog
from tests.admin_helpers import PASSWORD, make_superuser
from tests.factories import TriggerInstanceFactory, WorkflowFactory
from triggers.models import TriggerInstance, TriggerStatus, TriggerStatusChange
from triggers.models.events import EventRecord

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]
SECRET = {"email": "ada@example.com", "name": "Ada", "phone": "+15005550006", "token": "s3cr3t"}


def _ran(**kwargs) -> TriggerInstance:
    instance = TriggerInstanceFactory(workflow=WorkflowFactory(), payload=dict(SECRET), **kwargs)
    engine.step_execute(instance_id=instance.pk)
    return instance


def test_step_log_does_not_copy_the_payload(dispatched):
    instance = _ran()
    log = StepExecutionLog.objects.get(trigger=instance)
    assert log.input_context["payload"] == {"$ref": "instance.payload"}
    assert "s3cr3t" not in str(log.input_context)
    assert log.input_context["trigger"]["id"] == str(instance.pk)


def test_full_context_snapshots_on_request_with_redaction(settings, dispatched):
    settings.NOTIFYFLOW_STEP_LOG_FULL_CONTEXT = True
    settings.NOTIFYFLOW_REDACT_PATHS = ["token"]
    log = StepExecutionLog.objects.get(trigger=_ran())
    assert log.input_context["payload"] == {**SECRET, "token": "[redacted]"}


def test_redaction_paths_are_masked_in_the_api(api, settings, dispatched):
    settings.NOTIFYFLOW_REDACT_PATHS = ["token", "phone"]
    settings.NOTIFYFLOW_STEP_LOG_FULL_CONTEXT = True
    instance = _ran()
    settings.NOTIFYFLOW_REDACT_PATHS = ["token", "phone", "email"]
    detail = api.get(f"/api/v1/triggers/{instance.pk}/").json()
    assert detail["payload"] == {
        "name": "Ada",
        **dict.fromkeys(("email", "phone", "token"), "[redacted]"),
    }
    listed = api.get("/api/v1/triggers/?include_payload=true").json()["results"][0]
    assert listed["payload"]["token"] == "[redacted]"
    steps = api.get(f"/api/v1/triggers/{instance.pk}/steps/").json()["results"]
    assert "s3cr3t" not in str(steps) and "ada@example.com" not in str(steps[0]["input_context"])
    # The instance keeps the real values: templates need them.
    instance.refresh_from_db()
    assert instance.payload["token"] == "s3cr3t"


def test_redaction_paths_are_masked_in_the_admin(settings, dispatched):
    settings.NOTIFYFLOW_REDACT_PATHS = ["token"]
    instance = _ran()
    web = Client()
    user = make_superuser()
    assert web.login(request=HttpRequest(), username=user.username, password=PASSWORD)
    page = web.get(reverse("admin:triggers_triggerinstance_change", args=[instance.pk]))
    assert page.status_code == 200
    assert "s3cr3t" not in page.content.decode() and "[redacted]" in page.content.decode()


def _finished(days_ago: float, status: str = TriggerStatus.COMPLETED) -> TriggerInstance:
    instance = _ran()
    TriggerInstance.objects.filter(pk=instance.pk).update(
        status=status, finished_at=timezone.now() - timedelta(days=days_ago)
    )
    return instance


def test_purge_finished_deletes_old_finished_instances_and_their_history(dispatched):
    old = [_finished(40), _finished(35, TriggerStatus.FAILED), _finished(31, "cancelled")]
    recent = _finished(5)
    running = TriggerInstanceFactory(workflow=WorkflowFactory())
    EventRecord.objects.create(
        name="OLD", context_sha256="0" * 64, received_at=timezone.now() - timedelta(days=40)
    )
    EventRecord.objects.create(name="NEW", context_sha256="0" * 64)
    call_command("purge_finished", "--older-than", "30d", "--batch", "2")
    remaining = set(TriggerInstance.objects.values_list("pk", flat=True))
    assert remaining == {recent.pk, running.pk}
    gone = [i.pk for i in old]
    for model, field in (
        (StepExecutionLog, "trigger_id"),
        (TriggerStatusChange, "instance_id"),
        (Delivery, "instance_id"),
    ):
        assert not model.objects.filter(**{f"{field}__in": gone}).exists()
    assert StepExecutionLog.objects.filter(trigger=recent).exists()
    assert list(EventRecord.objects.values_list("name", flat=True)) == ["NEW"]


def _settings_import(env: dict[str, str]) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "EMAIL_", "SMS_"))}
    base.pop("NOTIFYFLOW_ALLOW_CONSOLE_BACKENDS", None)
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env={**base, "DJANGO_SETTINGS_MODULE": "notifyflow.settings", **env},
        capture_output=True,
        text=True,
    )


PRODUCTION = {
    "DJANGO_SECRET_KEY": "a-long-random-production-secret-0123456789abcdef-0123456789",
    "DJANGO_ALLOWED_HOSTS": "notify.example.com",
    "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend",
    "SMS_BACKEND": "twilio",
}


@pytest.mark.parametrize(
    "env",
    [
        {"EMAIL_BACKEND": "django.core.mail.backends.console.EmailBackend"},
        {"SMS_BACKEND": "console"},
    ],
)
def test_console_backends_refuse_to_start_in_production_unless_allowed(env):
    refused = _settings_import({**PRODUCTION, **env})
    assert refused.returncode != 0 and "console" in refused.stderr
    allowed = _settings_import({**PRODUCTION, **env, "NOTIFYFLOW_ALLOW_CONSOLE_BACKENDS": "1"})
    assert allowed.returncode == 0, allowed.stderr
    assert _settings_import({**PRODUCTION, **env, "DJANGO_DEBUG": "1"}).returncode == 0


def test_other_backends_start_in_production():
    for email, sms in (("locmem", "locmem"), ("filebased", "file"), ("smtp", "twilio")):
        started = _settings_import(
            {
                **PRODUCTION,
                "EMAIL_BACKEND": f"django.core.mail.backends.{email}.EmailBackend",
                "SMS_BACKEND": sms,
            }
        )
        assert started.returncode == 0, started.stderr
