PY := .venv/bin/python
VENV_STAMP := .venv/.installed

.PHONY: run test test-sqlite test-amqp lint bench bench-quick bench-scaling clean

$(VENV_STAMP): pyproject.toml
	python3 -m venv .venv
	.venv/bin/pip install -q --upgrade pip
	.venv/bin/pip install -q -e '.[test]'
	touch $(VENV_STAMP)

venv: $(VENV_STAMP)

run: $(VENV_STAMP)
	bash scripts/run.sh

# The modules whose code differs per database (hand-built PostgreSQL statements next to
# the ORM path): CI runs them on SQLite too (test-sqlite), so both paths are tested.
ENGINE_TESTS := tests/triggers/test_state.py tests/executions/test_engine.py \
	tests/executions/test_sweeper.py tests/executions/test_providers_email.py tests/executions/test_providers_sms.py \
	tests/api/test_step_logs.py tests/system/test_worker_commit_durability.py \
	tests/executions/test_claim_plan.py tests/system/test_worker_race.py tests/system/test_worker_recovery.py \
	tests/system/test_end_to_end.py tests/system/test_house_rules.py tests/triggers/test_cancel_and_pause.py \
	tests/triggers/test_inbox.py tests/system/test_running_instances.py \
	tests/executions/test_providers_failover.py tests/api/test_delivery_status.py tests/executions/test_nodes_webhook.py \
	tests/api/test_triggers_bulk.py tests/executions/test_parked_nodes.py

test: $(VENV_STAMP) lint
	$(PY) -m pytest $(PYTEST_ARGS)

# The same engine modules on the embedded default (SQLite, filesystem broker).
test-sqlite: $(VENV_STAMP)
	env -u DATABASE_URL -u CELERY_BROKER_URL NOTIFYFLOW_REQUIRE_SERVICES=0 \
		$(PY) -m pytest $(ENGINE_TESTS) $(PYTEST_ARGS)

# The broker-facing tests (marker `broker`: every worker and chaos test, and the few that
# publish for real) again on RabbitMQ; what is Redis-only skips, saying why. AMQP_URL
# names the vhost (.ci/run gives CI one of its own); the admin's browser test is not
# about the broker and runs once, in `make test`.
AMQP_URL ?= amqp://guest:guest@127.0.0.1:5672//
test-amqp: $(VENV_STAMP)
	CELERY_BROKER_URL=$(AMQP_URL) $(PY) -m pytest -m "broker and not browser" $(PYTEST_ARGS)

# Benchmarks (bench/README.md): own PostgreSQL database and Redis db, loopback only.
BENCH_STAMP := .venv/.bench-installed

$(BENCH_STAMP): $(VENV_STAMP) pyproject.toml
	.venv/bin/pip install -q -e '.[test,bench]' \
		|| echo "warning: bench extras not installed; profiles and peers skipped"
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(PY) -m bench.run $(BENCH_ARGS)

bench-quick: $(BENCH_STAMP)
	$(PY) -m bench.run --quick $(BENCH_ARGS)

# Scenario 2 only (references, peers, per-step costs) at 5,000 x 3 steps, ~8 min: the
# figures bench/SCALING.md is computed from.
bench-scaling: $(BENCH_STAMP)
	BENCH_EXEC_N=$${BENCH_EXEC_N:-5000} $(PY) -m bench.run --only execution $(BENCH_ARGS)

lint: $(VENV_STAMP)
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/lint-imports
	.venv/bin/mypy

clean:
	rm -rf var/*.sqlite3* var/broker var/mail var/sms
