"""Scenario 43 (issue 43): what translating a step's text costs. Run in-process through
``engine.step_execute`` (claim, render, the preference check, the feed write, record)
on PostgreSQL, in alternating chunks of the same run:

- **literal**: one ``in_app`` node whose title and body are written in the template;
- **translated**: the same node with every text a ``t`` key (interpolation and a plural)
  from the recipient's locale's catalogue (``fr``, in the workflow's namespace and
  ``common``), a date formatted by Babel in both.

Target: a translated step ≤ 1.1× a literal one (wall medians). Also reported: the CPU
medians and the queries per step (the catalogues are cached per process: none).
"""

from __future__ import annotations

import statistics
import uuid
from typing import Any

from django.db import connection
from django.test.utils import CaptureQueriesContext

from bench.scenarios.common import Ctx, S, ms
from bench.scenarios.in_process import due_instances, timed_steps
from recipients.models import Recipient
from translations.services import catalogue_put
from triggers.models import TriggerInstance
from workflows.models import Workflow
from workflows.services import workflow_save

TARGET = 1.1
PAYLOAD = {"order": 42, "parcels": 3, "at": "2026-03-05T10:00:00Z"}
DATE = '{{ payload.at | datetime: format: "long" }}'
CONFIGS = {
    "literal": {
        "title": "Votre commande {{ payload.order }} est partie",
        "body": "{{ payload.parcels }} colis ont quitté l'entrepôt. Livraison le " + DATE,
    },
    "translated": {
        "title": '{{ "order.title" | t: order: payload.order }}',
        "body": '{{ "order.parcels" | t: count: payload.parcels }} {{ "order.eta" | t }} ' + DATE,
    },
}
MESSAGES = {
    "order": {
        "title": "Your order %(order)s shipped",
        "parcels": {"one": "%(count)s parcel left", "other": "%(count)s parcels left"},
        "eta": "Arriving",
    }
}
FRENCH = {
    "order": {
        "title": "Votre commande %(order)s est partie",
        "parcels": {
            "one": "%(count)s colis a quitté l'entrepôt.",
            "other": "%(count)s colis ont quitté l'entrepôt.",
        },
    }
}
GROUPS = tuple(CONFIGS)


def _workflows() -> dict[str, Workflow]:
    catalogue_put(locale="en", namespace="common", messages={"order": {"eta": "Arriving"}})
    catalogue_put(locale="fr", namespace="common", messages={"order": {"eta": "Livraison le"}})
    flows = {}
    for group, config in CONFIGS.items():
        key = f"bench-{group}-i18n"
        if group == "translated":
            catalogue_put(locale="en", namespace=key, messages=MESSAGES)
            catalogue_put(locale="fr", namespace=key, messages=FRENCH)
        node = {"id": "bell", "type": "in_app", "config": config}
        definition = {"entry_node_id": "bell", "nodes": [node], "edges": []}
        flows[group] = workflow_save(key=key, name=key, definition=definition, actor="bench")
    return flows


def _instances(flow: Workflow, n: int, tag: str) -> list[uuid.UUID]:
    people = [Recipient(id=f"{tag}-{i}", locale="fr", timezone="Europe/Paris") for i in range(n)]
    Recipient.objects.bulk_create(people, batch_size=1000)
    return due_instances(flow, people, key_prefix=tag, node_id="bell", payload=PAYLOAD)


def _measure(ctx: Ctx, flows: dict[str, Workflow]) -> dict[str, Any]:
    rounds, per_round = (2, 100) if ctx.quick else (4, 500)
    tag = uuid.uuid4().hex[:6]
    for group in GROUPS:  # warm-up: templates compiled, catalogues cached
        timed_steps(_instances(flows[group], 10, f"{tag}-{group}-warm"))
    queries = {}
    for group in GROUPS:
        with CaptureQueriesContext(connection) as captured:
            timed_steps(_instances(flows[group], 10, f"{tag}-{group}-q"))
        queries[group] = len(captured.captured_queries) / 10
    wall: dict[str, list[float]] = {g: [] for g in GROUPS}
    cpu: dict[str, list[float]] = {g: [] for g in GROUPS}
    chunk = 25
    for r in range(rounds):
        ids = {g: _instances(flows[g], per_round, f"{tag}-{g}-r{r}") for g in GROUPS}
        for start in range(0, per_round, chunk):
            turn = start // chunk + r
            for group in GROUPS if turn % 2 == 0 else reversed(GROUPS):
                w, c = timed_steps(ids[group][start : start + chunk])
                wall[group] += w
                cpu[group] += c
    measured = TriggerInstance.objects.filter(workflow__in=flows.values())
    unfinished = measured.exclude(status=S.COMPLETED).count()
    if unfinished:
        raise RuntimeError(f"translations: {unfinished} instances did not complete")
    return {
        "steps_per_group": rounds * per_round,
        "wall_median_s": {g: statistics.median(t) for g, t in wall.items()},
        "cpu_median_s": {g: statistics.median(t) for g, t in cpu.items()},
        "queries_per_step": queries,
    }


def scenario_translations(ctx: Ctx) -> None:
    result = _measure(ctx, _workflows())
    wall, cpu = result["wall_median_s"], result["cpu_median_s"]
    ratio = wall["translated"] / wall["literal"]
    result["ratio_translated_to_literal"] = ratio
    ctx.results["translations"] = result
    steps = result["steps_per_group"]
    ctx.row(
        "43 translations",
        "in_app step, title and body by t (fr, plural, interpolation), wall median",
        ms(wall["translated"]),
        f"same step with literal text {ms(wall['literal'])}, same run",
        "<= 1.1x",
        f"{ratio:.2f}x",
    )
    ctx.row(
        "43 translations",
        "CPU median literal / translated",
        f"{ms(cpu['literal'])} / {ms(cpu['translated'])}",
        "queries/step " + ", ".join(f"{g} {q:.1f}" for g, q in result["queries_per_step"].items()),
    )
    ctx.target(
        "translations: step with t <= 1.1x literal text",
        f"{ratio:.2f}x",
        "<= 1.1x",
        ok=ratio <= TARGET,
        note=f"wall median of {steps} steps each, in-process, chunks of 25 alternating",
    )
