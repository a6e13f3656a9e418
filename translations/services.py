"""Writes to the catalogues: the API, the admin and the workflow files all come through
here."""

from __future__ import annotations

import re
from typing import Any

from notifyflow.errors import ApplicationError

from . import selectors
from .locales import locale_check, messages_check
from .models import Catalogue

# What a workflow key may be (its SlugField): a namespace is one, or ``common``.
NAMESPACE_PATTERN = r"^[-a-zA-Z0-9_]{1,100}$"


def namespace_check(namespace: str, *, field: str = "namespace") -> str:
    """A workflow key or ``common``: a slug, else 400 ``invalid_namespace``."""
    if not isinstance(namespace, str) or not re.fullmatch(NAMESPACE_PATTERN, namespace):
        raise ApplicationError(
            code="invalid_namespace",
            field=field,
            message=f"{field}: must be a workflow key or 'common' (a slug)",
        )
    return namespace


def catalogue_put(
    *, locale: str, namespace: str, messages: Any, actor: str = ""
) -> tuple[Catalogue, bool]:
    """Replace (or create) the catalogue of ``locale`` in ``namespace``; returns it and
    whether it was created. Raises 400 ``invalid_locale``, ``invalid_namespace`` or
    ``invalid_messages`` naming the path of the bad value (nothing written)."""
    locale_check(locale)
    namespace_check(namespace)
    messages_check(messages)
    catalogue, created = Catalogue.objects.update_or_create(
        locale=locale,
        namespace=namespace,
        defaults={"messages": messages, "updated_by": actor[:150]},
    )
    selectors.cache_clear()
    return catalogue, created


def catalogues_replace(*, namespace: str, catalogues: dict[str, Any], actor: str = "") -> None:
    """Make ``catalogues`` ({locale: messages}) the namespace's catalogues: each put,
    those of other locales deleted."""
    for locale, messages in catalogues.items():
        catalogue_put(locale=locale, namespace=namespace, messages=messages, actor=actor)
    Catalogue.objects.filter(namespace=namespace).exclude(locale__in=list(catalogues)).delete()
    selectors.cache_clear()


def catalogue_delete(*, locale: str, namespace: str) -> None:
    """Delete the catalogue; 404 ``translation_not_found`` if there is none."""
    selectors.catalogue_get(locale=locale, namespace=namespace).delete()
    selectors.cache_clear()
