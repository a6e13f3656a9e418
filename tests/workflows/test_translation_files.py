"""A workflow's catalogues as files: synced before the workflow (its keys checked
against them), exported beside it, a folder without translations/ leaving them alone,
a bad file refused naming it."""

from __future__ import annotations

import json

import pytest

from tests.factories import email_definition
from translations.models import Catalogue
from translations.services import catalogue_put
from workflows.files import read_directory, workflow_files, write_files
from workflows.models import Workflow
from workflows.sync import SyncStatus, sync_plan, workflow_spec, workflows_sync

pytestmark = pytest.mark.django_db

BODY = '{{ "hello" | t }}'


def folder(tmp_path, translations: dict | None, default_locale: str = "") -> None:
    document = {"key": "hi", "name": "Hi", "definition": email_definition(BODY)}
    if default_locale:
        document["default_locale"] = default_locale
    (tmp_path / "hi").mkdir()
    (tmp_path / "hi" / "workflow.json").write_text(json.dumps(document))
    for locale, messages in (translations or {}).items():
        (tmp_path / "hi" / "translations").mkdir(exist_ok=True)
        (tmp_path / "hi" / "translations" / f"{locale}.json").write_text(json.dumps(messages))


def test_sync_writes_the_catalogues_before_the_workflow_that_uses_them(tmp_path):
    folder(tmp_path, {"en": {"hello": "Hello"}, "fr": {"hello": "Bonjour"}}, "en")
    specs, problems = read_directory(tmp_path)
    assert problems == []
    [result] = workflows_sync(specs=specs)
    assert result.status == SyncStatus.CREATED
    stored = dict(Catalogue.objects.filter(namespace="hi").values_list("locale", "messages"))
    assert stored == {"en": {"hello": "Hello"}, "fr": {"hello": "Bonjour"}}
    assert Workflow.objects.get(key="hi").default_locale == "en"
    assert sync_plan(specs=read_directory(tmp_path)[0])[0].status == SyncStatus.UNCHANGED


def test_a_locale_file_removed_deletes_its_catalogue_and_a_changed_one_updates(tmp_path):
    folder(tmp_path, {"en": {"hello": "Hello"}, "fr": {"hello": "Bonjour"}})
    workflows_sync(specs=read_directory(tmp_path)[0])
    (tmp_path / "hi" / "translations" / "fr.json").unlink()
    (tmp_path / "hi" / "translations" / "en.json").write_text('{"hello": "Hi"}')
    [result] = workflows_sync(specs=read_directory(tmp_path)[0])
    assert result.status == SyncStatus.UPDATED and "Hi" in result.diff
    stored = dict(Catalogue.objects.filter(namespace="hi").values_list("locale", "messages"))
    assert stored == {"en": {"hello": "Hi"}}


def test_a_folder_without_translations_leaves_the_stored_ones_alone(tmp_path):
    catalogue_put(locale="en", namespace="hi", messages={"hello": "Hello"})
    folder(tmp_path, None)
    assert workflows_sync(specs=read_directory(tmp_path)[0])[0].status == SyncStatus.CREATED
    assert sync_plan(specs=read_directory(tmp_path)[0])[0].status == SyncStatus.UNCHANGED
    assert Catalogue.objects.filter(namespace="hi").exists()


def test_bad_translation_files_are_problems_naming_them(tmp_path):
    folder(tmp_path, {"en": {"hello": 3}})
    (tmp_path / "hi" / "translations" / "fr.json").write_text("{not json")
    _, problems = read_directory(tmp_path)
    assert [p.file for p in problems] == ["hi/translations/fr.json"]
    (tmp_path / "hi" / "translations" / "fr.json").unlink()
    _, problems = read_directory(tmp_path)
    assert problems[0].field == "translations" and "en.hello" in problems[0].message


def test_export_writes_the_catalogues_and_reads_back_the_same_spec(tmp_path):
    catalogue_put(locale="en", namespace="hi", messages={"hello": "Hello"})
    catalogue_put(locale="pt-BR", namespace="hi", messages={"hello": "Oi"})
    from workflows.services import workflow_save

    workflow_save(key="hi", name="Hi", definition=email_definition(BODY), default_locale="en")
    spec = workflow_spec(Workflow.objects.get(key="hi"))
    files = workflow_files(spec)
    assert json.loads(files["translations/pt-BR.json"]) == {"hello": "Oi"}
    write_files(tmp_path / "hi", files)
    [read_back], problems = read_directory(tmp_path)
    assert problems == [] and read_back == spec
