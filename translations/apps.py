from django.apps import AppConfig


class TranslationsConfig(AppConfig):
    name = "translations"
    verbose_name = "Translations"
