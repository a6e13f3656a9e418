from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "api"
    verbose_name = "API"

    def ready(self) -> None:
        # drf-spectacular's extensions for our authentication class and the workflow
        # definition field register themselves on import, before any schema is built.
        from . import openapi  # noqa: F401
