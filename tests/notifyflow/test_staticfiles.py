"""Static files with and without collectstatic (issue 23): a deploy that skipped it
still renders the admin and the API docs (unhashed files served from the apps'
directories) and `manage.py check` says to run it; once collected, pages link to the
hashed, compressed copies."""

from __future__ import annotations

import io
import re

import pytest
from django.core import checks
from django.core.management import call_command
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.fixture
def empty_static_root(settings, tmp_path):
    # The project's storage (conftest gives other in-process tests the plain one).
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "notifyflow.staticfiles.ManifestOrFindersStorage"},
    }
    settings.STATIC_ROOT = tmp_path / "static"
    settings.STATIC_ROOT.mkdir()
    return settings.STATIC_ROOT


def linked_css(html: str) -> list[str]:
    return re.findall(r'href="(/static/[^"]+\.css)"', html)


def staticfiles_warnings() -> list[str]:
    return [m.id for m in checks.run_checks() if m.id]


def test_without_collectstatic_the_admin_and_docs_render_with_their_css(empty_static_root):
    client = Client()
    for page in ("/admin/login/", "/api/docs/"):
        response = client.get(page)
        assert response.status_code == 200, page
        css = linked_css(response.content.decode())
        assert css, page
        for url in css:
            served = client.get(url)
            assert served.status_code == 200, url
            assert served["Content-Type"].startswith("text/css"), url
    assert "/static/admin/css/base.css" in linked_css(client.get("/admin/login/").content.decode())
    assert client.get("/api/redoc/").status_code == 200


def test_without_collectstatic_check_warns_to_run_it(empty_static_root):
    assert "notifyflow.W001" in staticfiles_warnings()
    message = next(m for m in checks.run_checks() if m.id == "notifyflow.W001")
    assert "collectstatic" in message.hint


def test_collectstatic_does_not_warn_that_it_was_not_run(empty_static_root):
    out, err = io.StringIO(), io.StringIO()
    call_command("collectstatic", "--noinput", skip_checks=False, stdout=out, stderr=err)
    assert "W001" not in out.getvalue() + err.getvalue()


def test_after_collectstatic_pages_link_hashed_files_and_check_is_quiet(
    empty_static_root, settings
):
    call_command("collectstatic", "--noinput", verbosity=0)
    # A new process would read the new manifest: here, a fresh storage object (Django
    # builds one when STATIC_ROOT is set, as for a new process).
    settings.STATIC_ROOT = empty_static_root
    client = Client()
    css = linked_css(client.get("/admin/login/").content.decode())
    base = next(url for url in css if url.startswith("/static/admin/css/base."))
    assert re.fullmatch(r"/static/admin/css/base\.[0-9a-f]{12}\.css", base)
    served = client.get(base)
    assert served.status_code == 200 and "immutable" in served["Cache-Control"]
    assert "notifyflow.W001" not in staticfiles_warnings()
