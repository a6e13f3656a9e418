PY := .venv/bin/python
VENV_STAMP := .venv/.installed

.PHONY: run test pytest test-sqlite test-amqp lint bench bench-quick bench-scaling clean

$(VENV_STAMP): pyproject.toml
	python3 -m venv .venv
	.venv/bin/pip install -q --upgrade pip
	.venv/bin/pip install -q -e '.[test]'
	touch $(VENV_STAMP)

venv: $(VENV_STAMP)

run: $(VENV_STAMP)
	bash scripts/run.sh

# One test process per core (pytest-xdist): each has its own test database and, on
# Redis, its own broker database (tests/settings.py). PYTEST_WORKERS=0 runs in one.
PYTEST_WORKERS ?= auto
test: $(VENV_STAMP) lint pytest

pytest: $(VENV_STAMP)
	$(PY) -m pytest -n $(PYTEST_WORKERS) $(PYTEST_ARGS)

# The tests of code that differs per database (marker both_databases) on the embedded
# default (SQLite, filesystem broker), so both paths are tested.
test-sqlite: $(VENV_STAMP)
	env -u DATABASE_URL -u CELERY_BROKER_URL NOTIFYFLOW_REQUIRE_SERVICES=0 \
		$(PY) -m pytest -m both_databases $(PYTEST_ARGS)

# The broker-facing tests (marker `broker`: every worker and chaos test, and the few that
# publish for real) again on RabbitMQ; what is Redis-only skips, saying why. AMQP_URL
# names the vhost (.ci/run gives CI one of its own); the admin's browser test is not
# about the broker and runs once, in `make test`.
AMQP_URL ?= amqp://guest:guest@127.0.0.1:5672//
# One process unless told: with AMQP_PYTEST_WORKERS=N the vhosts <vhost>_gw1 ...
# <vhost>_gw(N-1) must exist too (tests/settings.py; .ci/run makes them).
AMQP_PYTEST_WORKERS ?= 0
test-amqp: $(VENV_STAMP)
	CELERY_BROKER_URL=$(AMQP_URL) $(PY) -m pytest -n $(AMQP_PYTEST_WORKERS) \
		-m "broker and not browser" $(PYTEST_ARGS)

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
