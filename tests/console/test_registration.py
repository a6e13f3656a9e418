"""The console owns the admin: each of the product's models has one ModelAdmin, defined in
the console app, and nothing replaces a registration later."""

from __future__ import annotations

from pathlib import Path

from django.apps import apps
from django.contrib import admin

ROOT = Path(__file__).resolve().parents[2]
# Every app of this repository that has models (the domain apps).
PRODUCT_APPS = [
    config.label
    for config in apps.get_app_configs()
    if Path(config.path).parent == ROOT and config.models_module is not None
]


def test_every_registered_product_model_has_its_admin_in_the_console():
    registered = {
        model._meta.label: type(admin.site.get_model_admin(model)).__module__
        for app in PRODUCT_APPS
        for model in apps.get_app_config(app).get_models()
        if admin.site.is_registered(model)
    }
    assert set(registered) == {
        "workflows.Workflow",
        "recipients.Recipient",
        "recipients.RecipientList",
        "gates.Batch",
        "triggers.FanOut",
        "gates.ThrottleCounter",
        "triggers.TriggerInstance",
        "triggers.TriggerStatusChange",
        "api_keys.ApiKey",
        "triggers.WorkflowTrigger",
        "triggers.EventRecord",
        "executions.StepExecutionLog",
        "executions.Delivery",
        "status_webhooks.WebhookEndpoint",
        "status_webhooks.WebhookMessage",
        "feed.FeedItem",
        "translations.Catalogue",
    }
    assert all(module.startswith("console.") for module in registered.values()), registered


def test_no_product_module_unregisters_an_admin():
    offenders = [
        str(path.relative_to(ROOT))
        for app in (*PRODUCT_APPS, "notifyflow", "console")
        for path in (ROOT / app).rglob("*.py")
        if "site.unregister(" in path.read_text(encoding="utf-8")
    ]
    assert offenders == []


def test_no_domain_app_keeps_an_admin_module():
    assert [app for app in PRODUCT_APPS if (ROOT / app / "admin.py").exists()] == []
