"""The bench scenarios, one module each, imported by run.py after django.setup() with
bench settings. ``common`` holds what they share (workflows, sizes, the run's context,
the result table and targets, waits and load generation).

Every figure is measured next to an in-run reference. Nothing here asserts a speed:
a scenario raises only when something really broke (a process died, a drain timed out,
an instance failed).
"""

from bench.scenarios.bulk import scenario_bulk
from bench.scenarios.common import (
    DISTURBANCES,
    EXPECTED_TARGETS,
    Ctx,
    Target,
    derive_targets,
    flush_broker,
    preload,
    setup,
)
from bench.scenarios.cost import scenario_cost
from bench.scenarios.delay import scenario_delay
from bench.scenarios.execution import scenario_execution
from bench.scenarios.gates import scenario_gates
from bench.scenarios.hold import scenario_hold_and_rss
from bench.scenarios.ingestion import scenario_ingestion
from bench.scenarios.people import scenario_people
from bench.scenarios.preferences import scenario_preferences
from bench.scenarios.profile import scenario_profile
from bench.scenarios.running import scenario_running

__all__ = [
    "DISTURBANCES",
    "EXPECTED_TARGETS",
    "Ctx",
    "Target",
    "derive_targets",
    "flush_broker",
    "preload",
    "scenario_bulk",
    "scenario_cost",
    "scenario_delay",
    "scenario_execution",
    "scenario_gates",
    "scenario_hold_and_rss",
    "scenario_ingestion",
    "scenario_preferences",
    "scenario_people",
    "scenario_profile",
    "scenario_running",
    "setup",
]
