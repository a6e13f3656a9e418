"""A message catalogue: the messages of one locale in one namespace (a workflow key, or
``common`` for those every workflow shares)."""

from __future__ import annotations

from django.db import models

COMMON_NAMESPACE = "common"


class Catalogue(models.Model):
    locale = models.CharField(max_length=35)
    namespace = models.SlugField(max_length=100)
    # Nested objects of strings: ``{"order": {"shipped": {"title": "..."}}}`` is the key
    # ``order.shipped.title``; an object of plural forms (``one``, ``other``, ...) is one
    # message (``translations.locales.PLURAL_FORMS``).
    messages = models.JSONField(default=dict)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.CharField(max_length=150, blank=True, default="")

    class Meta:
        ordering = ["namespace", "locale"]
        constraints = [
            models.UniqueConstraint(
                fields=["locale", "namespace"], name="translation_catalogue_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.locale}"
