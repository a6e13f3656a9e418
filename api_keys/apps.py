from django.apps import AppConfig


class ApiKeysConfig(AppConfig):
    """API keys and the Bearer authentication that turns a request's token into one."""

    name = "api_keys"
    verbose_name = "API keys"
