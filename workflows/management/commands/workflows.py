"""``manage.py workflows export|validate|diff|sync [--dir D]``: workflows kept as files in
a repository (docs/workflows-as-code.md). Exit codes: 0 done or nothing to do, 1 a file
is invalid (every problem printed with its file, node and field), 2 ``sync --dry-run``
found changes (a CI check for drift)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from workflows.file_schema import workflow_file_schema_text
from workflows.files import SCHEMA_FILE, WorkflowSpec, read_directory, workflow_files, write_files
from workflows.models import Workflow
from workflows.sync import SyncResult, results_summary, sync_plan, workflow_spec, workflows_sync

INVALID = 1
DRIFT = 2
# How diff names each status.
DIFF_LABELS = {
    "created": "new",
    "updated": "changed",
    "unchanged": "unchanged",
    "only_in_database": "only in the database",
    "deactivated": "deactivated",
}


class Command(BaseCommand):
    help = (
        "Workflows as files: export the stored ones, validate the files, diff them with "
        "the database, sync them into it. Exit 0: done or nothing to do; 1: invalid "
        "files; 2: sync --dry-run found changes."
    )

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        export = actions.add_parser("export", help="write the current versions as files")
        export.add_argument("keys", nargs="*", metavar="KEY", help="default: every workflow")
        validate = actions.add_parser("validate", help="check every file; list every problem")
        diff = actions.add_parser("diff", help="per workflow: new, changed, unchanged, ...")
        sync = actions.add_parser("sync", help="create or update what changed, in one go")
        sync.add_argument("--dry-run", action="store_true", help="write nothing; exit 2 on changes")
        sync.add_argument(
            "--prune", action="store_true", help="deactivate workflows without a folder"
        )
        sync.add_argument("--message", "-m", default="", help="kept on each new version")
        for action in (export, validate, diff, sync):
            action.add_argument(
                "--dir",
                dest="directory",
                default=None,
                help="the workflows directory (default: NOTIFYFLOW_WORKFLOWS_DIR, "
                f"{settings.NOTIFYFLOW_WORKFLOWS_DIR!r})",
            )

    def handle(self, *args: Any, action: str, directory: str | None, **options: Any) -> None:
        path = Path(directory or settings.NOTIFYFLOW_WORKFLOWS_DIR)
        if action == "export":
            self.export(path, keys=options["keys"])
            return
        specs = self.read(path)
        if action == "validate":
            self.stdout.write(f"{len(specs)} workflows in {path}: valid")
        elif action == "diff":
            self.show(sync_plan(specs=specs), labels=DIFF_LABELS)
        else:
            self.sync(specs, **options)

    def read(self, path: Path) -> list[WorkflowSpec]:
        """The directory's specs; exit 1 after listing every problem."""
        specs, problems = read_directory(path)
        if problems:
            for problem in problems:
                self.stderr.write(str(problem))
            raise CommandError(f"{len(problems)} problems in {path}", returncode=INVALID)
        return specs

    def export(self, path: Path, *, keys: list[str]) -> None:
        workflows = Workflow.objects.select_related("current_version").order_by("key")
        if keys:
            workflows = workflows.filter(key__in=keys)
            unknown = sorted(set(keys) - {w.key for w in workflows})
            if unknown:
                raise CommandError(f"no workflow {', '.join(unknown)}", returncode=INVALID)
        written = write_files(path, {SCHEMA_FILE: workflow_file_schema_text()})
        count = 0
        for workflow in workflows:
            spec = workflow_spec(workflow)
            if spec is None:
                continue  # never saved with a definition: nothing to write
            written += write_files(path / spec.key, workflow_files(spec))
            count += 1
        for file in written:
            self.stdout.write(f"wrote {file}")
        self.stdout.write(f"{count} workflows exported to {path} ({len(written)} files written)")

    def sync(self, specs: list[WorkflowSpec], *, dry_run: bool, prune: bool, message: str, **_):
        results = workflows_sync(specs=specs, prune=prune, dry_run=dry_run, message=message)
        self.show(results)
        if dry_run and any(result.changed for result in results):
            self.stdout.write("dry run: nothing written")
            sys.exit(DRIFT)

    def show(self, results: list[SyncResult], labels: dict[str, str] | None = None) -> None:
        for result in results:
            label = labels[result.status] if labels else result.status.value
            version = f" (v{result.version})" if result.version else ""
            self.stdout.write(f"{result.key}: {label}{version}")
            if result.diff:
                self.stdout.write(result.diff, ending="" if result.diff.endswith("\n") else "\n")
        self.stdout.write(results_summary(results))
