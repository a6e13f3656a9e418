"""Reads of the catalogues: for the API and the admin, and the per-process cached lookup
a render uses (``translator``)."""

from __future__ import annotations

import threading
from typing import Any

from cachetools import TTLCache
from django.conf import settings
from django.db.models import QuerySet

from notifyflow.errors import NotFoundError

from .locales import flatten, locale_chain
from .models import COMMON_NAMESPACE, Catalogue
from .translator import Translator

# A saved catalogue is seen at once by this process (``cache_clear`` on save) and by the
# others within this many seconds: a render reads no row while it is fresh.
CACHE_SECONDS = 10

_lock = threading.Lock()
_merged: TTLCache[tuple[str, str, str], tuple[dict[str, Any], dict[str, Any]]] = TTLCache(
    maxsize=1024, ttl=CACHE_SECONDS
)


def catalogue_get(*, locale: str, namespace: str) -> Catalogue:
    """The catalogue, or 404 ``translation_not_found``."""
    catalogue = Catalogue.objects.filter(locale=locale, namespace=namespace).first()
    if catalogue is None:
        raise NotFoundError(
            code="translation_not_found",
            field="namespace",
            message=f"no catalogue for locale {locale!r} in namespace {namespace!r}",
        )
    return catalogue


def catalogue_list(*, namespace: str | None = None) -> QuerySet[Catalogue]:
    catalogues = Catalogue.objects.order_by("namespace", "locale")
    return catalogues if namespace is None else catalogues.filter(namespace=namespace)


def default_locale(workflow_default: str = "") -> str:
    return workflow_default or settings.NOTIFYFLOW_DEFAULT_LOCALE


def translator(*, locale: str, namespace: str, default: str = "") -> Translator:
    """A fresh ``Translator`` (its own record of missing keys) for one render in
    ``locale``: the workflow's ``namespace`` then ``common``, along ``pt-BR`` -> ``pt``,
    falling back to ``default`` (the setting's locale when empty)."""
    default = default_locale(default)
    key = (locale, namespace, default)
    maps = _merged.get(key)
    if maps is None:
        maps = _maps(locale, namespace, default)
        with _lock:
            _merged[key] = maps
    primary, fallback = maps
    return Translator(locale=locale, default=default, primary=primary, fallback=fallback)


def _maps(locale: str, namespace: str, default: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The messages of the send's own locale and of the default's, each flattened, the
    namespace's over ``common``'s and the region's over the language's."""
    chain = locale_chain(locale, default)
    defaults = locale_chain(default, default)
    # The send's locale and its language: a key found there is not missing (``en-GB``
    # taking ``en``'s text is the usual fallback, not a gap).
    own = tuple(dict.fromkeys((locale, locale.split("-", 1)[0])))
    rows = Catalogue.objects.filter(
        locale__in=chain, namespace__in={namespace, COMMON_NAMESPACE}
    ).values_list("locale", "namespace", "messages")
    flat = {(row_locale, ns): flatten(messages) for row_locale, ns, messages in rows}

    def merged(locales: tuple[str, ...]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for name in reversed(locales):  # the first in the chain wins
            result.update(flat.get((name, COMMON_NAMESPACE), {}))
            result.update(flat.get((name, namespace), {}))
        return result

    return merged(own), merged(defaults)


def default_keys(*, namespace: str, default: str = "") -> dict[str, Any]:
    """The messages a workflow's templates may use without a ``translation_missing``
    problem: its namespace's and ``common``'s in the default locale."""
    return dict(_maps(default_locale(default), namespace, default_locale(default))[1])


def catalogue_gaps(catalogue: Catalogue, *, default: str = "") -> list[str]:
    """The keys the default locale's catalogue of the same namespace has and
    ``catalogue`` lacks, sorted."""
    reference = Catalogue.objects.filter(
        locale=default_locale(default), namespace=catalogue.namespace
    ).first()
    if reference is None:
        return []
    return sorted(set(flatten(reference.messages)) - set(flatten(catalogue.messages)))


def cache_clear() -> None:
    with _lock:
        _merged.clear()
