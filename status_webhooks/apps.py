from django.apps import AppConfig


class StatusWebhooksConfig(AppConfig):
    name = "status_webhooks"
    verbose_name = "Status webhooks"
