"""Static files that work whether or not ``collectstatic`` has run.

After ``manage.py collectstatic`` (the Docker image does it at build), pages link to
hashed, compressed copies under ``STATIC_ROOT``, cached for a year. A deploy that
skipped it still gets a working admin and API docs: with no manifest in
``STATIC_ROOT``, pages link to the unhashed names and the middleware serves them from
the apps' own static directories (Django's finders), and ``manage.py check`` warns. Without
this, every page that links a static file answered 500 ("Missing staticfiles manifest
entry").
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.staticfiles.storage import staticfiles_storage
from django.core.checks import CheckMessage, Warning, register
from whitenoise.middleware import WhiteNoiseMiddleware
from whitenoise.storage import CompressedManifestStaticFilesStorage


class ManifestOrFindersStorage(CompressedManifestStaticFilesStorage):
    """WhiteNoise's manifest storage; when ``STATIC_ROOT`` has no manifest (collectstatic
    never ran), URLs use the unhashed names instead of raising ``ValueError``. A manifest
    that exists but lacks an entry is still an error (a release that collected the wrong
    files)."""

    manifest_found = False

    def read_manifest(self) -> str | None:
        content = super().read_manifest()
        self.manifest_found = content is not None
        return content

    def save_manifest(self) -> None:
        super().save_manifest()
        self.manifest_found = True

    def stored_name(self, name: str) -> str:
        if not self.manifest_found:
            return name
        return super().stored_name(name)


def static_files_collected() -> bool:
    """Whether the static files storage found collectstatic's manifest (storages other
    than ours count as collected: they need no fallback)."""
    return getattr(staticfiles_storage, "manifest_found", True)


class StaticFilesMiddleware(WhiteNoiseMiddleware):
    """WhiteNoise, which serves ``STATIC_ROOT``; when nothing was collected it also
    serves the apps' static files through the finders (what ``WHITENOISE_USE_FINDERS``
    does, switched on by the missing manifest rather than by ``DEBUG``)."""

    def __init__(self, get_response: Any = None, settings: Any = settings) -> None:
        super().__init__(get_response, settings=settings)
        if not getattr(self, "use_finders", False) and not static_files_collected():
            self.use_finders = True
            if not self.autorefresh:
                self.add_files_from_finders()


# Untagged: `collectstatic` runs only the checks tagged staticfiles, and it is the one
# command that must not tell its own user to run it.
@register()
def check_static_files_collected(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    if static_files_collected():
        return []
    return [
        Warning(
            f"static files were not collected: {settings.STATIC_ROOT} has no manifest, so "
            "pages link to unhashed files served from the apps' directories, without "
            "compression or long-lived caching",
            hint="run `python manage.py collectstatic --noinput` at each release, before "
            "starting the web processes",
            id="notifyflow.W001",
        )
    ]
