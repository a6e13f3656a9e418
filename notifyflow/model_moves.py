"""What a migration needs when a model moves to another app and keeps its table (the
new app creates it in state only; the old one deletes it in state only): its content
type follows it, so the permissions, group grants and admin log entries that point at
it stay attached."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import migrations


def content_types_moved(*, old: str, new: str, models: Sequence[str]) -> migrations.RunPython:
    """Relabel ``old``.<model> as ``new``.<model> (and back when unapplied). A database
    that already has the new label (a model registered before the move ran) keeps both
    rows: the old one's grants are not deleted behind the operator's back."""

    def relabel(source: str, target: str):
        def run(apps, schema_editor):
            ContentType = apps.get_model("contenttypes", "ContentType")
            taken = set(
                ContentType.objects.filter(app_label=target, model__in=models).values_list(
                    "model", flat=True
                )
            )
            ContentType.objects.filter(app_label=source, model__in=models).exclude(
                model__in=taken
            ).update(app_label=target)

        return run

    return migrations.RunPython(relabel(old, new), relabel(new, old))
