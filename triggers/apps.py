from django.apps import AppConfig


class TriggersConfig(AppConfig):
    name = "triggers"
    verbose_name = "Triggers"
