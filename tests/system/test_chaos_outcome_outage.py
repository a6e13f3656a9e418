"""Chaos: PostgreSQL stopped for 12 s mid-batch under real workers sends nothing twice.

A step that sent its message while the database was going away keeps retrying its
outcome write while its lease holds (executions.engine), instead of giving up after a
few seconds and leaving the lease to expire and the step - and its send - to run again
(4 of 300 emails went out twice, ~95 s late, before). Same private servers, batch and
checks as tests/system/test_chaos.py, with the production lease and time limits.
"""

from __future__ import annotations

import time

import pytest

from tests.system.test_chaos import Batch, api, fleet, report, services  # noqa: F401 - fixtures

pytestmark = pytest.mark.chaos

OUTAGE_S = 12
# The defaults (docs/settings.md): the lease is what a lost outcome used to wait out.
PRODUCTION_LIMITS = {
    "NOTIFYFLOW_STEP_SOFT_TIME_LIMIT_S": "30",
    "NOTIFYFLOW_STEP_TIME_LIMIT_S": "45",
    "NOTIFYFLOW_LEASE_S": "90",
}


def test_postgresql_stopped_12_s_mid_batch_sends_nothing_twice(
    services,  # noqa: F811
    api,  # noqa: F811
    tmp_path,
    capsys,
):
    batch = Batch(services, api, tmp_path, "pg-stopped-12s")
    with fleet(batch, **PRODUCTION_LIMITS):
        batch.create()
        batch.wait_mid_batch()
        services.pg_stop()
        time.sleep(OUTAGE_S)
        services.pg_start()
        back = time.monotonic()
        # A claim whose reply the outage cut off still waits for its lease (nothing was
        # sent for it): allow for one lease.
        drain_s = batch.drain(timeout=200, since=back)
    figures = batch.check(in_flight_at_faults=0)
    assert figures["sent_twice"] == 0
    report(capsys, f"PostgreSQL stopped {OUTAGE_S} s", batch, drain_s, figures)
