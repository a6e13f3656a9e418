"""The bench scenarios, one module each, imported by run.py after django.setup() with
bench settings. ``common`` holds what they share (workflows, sizes, the run's context,
the result table and targets, load generation); ``drain`` loads instances and waits
for them.

Every figure is measured next to an in-run reference. Nothing here asserts a speed:
a scenario raises only when something really broke (a process died, a drain timed out,
an instance failed).
"""

from bench.scenarios.backlog import scenario_backlog
from bench.scenarios.bulk import scenario_bulk
from bench.scenarios.common import (
    DISTURBANCES,
    EXPECTED_TARGETS,
    Ctx,
    Target,
    derive_targets,
    flush_broker,
    setup,
)
from bench.scenarios.cost import scenario_cost
from bench.scenarios.delay import scenario_delay
from bench.scenarios.digests import scenario_digests
from bench.scenarios.drain import preload
from bench.scenarios.execution import scenario_execution
from bench.scenarios.feed import scenario_feed
from bench.scenarios.gates import scenario_gates
from bench.scenarios.hold import scenario_hold_and_rss
from bench.scenarios.ingestion import scenario_ingestion
from bench.scenarios.lanes import scenario_lanes
from bench.scenarios.people import scenario_people
from bench.scenarios.preferences import scenario_preferences
from bench.scenarios.profile import scenario_profile
from bench.scenarios.push import scenario_push
from bench.scenarios.push_fanout import scenario_push_fanout
from bench.scenarios.running import scenario_running
from bench.scenarios.status_webhooks import scenario_status_webhooks
from bench.scenarios.translations import scenario_translations

__all__ = [
    "scenario_backlog",
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
    "scenario_digests",
    "scenario_execution",
    "scenario_feed",
    "scenario_gates",
    "scenario_hold_and_rss",
    "scenario_ingestion",
    "scenario_lanes",
    "scenario_preferences",
    "scenario_people",
    "scenario_profile",
    "scenario_push",
    "scenario_push_fanout",
    "scenario_running",
    "scenario_status_webhooks",
    "scenario_translations",
    "setup",
]
