PY := .venv/bin/python
VENV_STAMP := .venv/.installed

.PHONY: run test lint bench bench-quick clean

$(VENV_STAMP): pyproject.toml
	python3 -m venv .venv
	.venv/bin/pip install -q --upgrade pip
	.venv/bin/pip install -q -e '.[test]'
	touch $(VENV_STAMP)

venv: $(VENV_STAMP)

run: $(VENV_STAMP)
	bash scripts/run.sh

test: $(VENV_STAMP)
	.venv/bin/ruff check .
	$(PY) -m pytest $(PYTEST_ARGS)

# Benchmarks (bench/README.md): own PostgreSQL database and Redis db, loopback only.
BENCH_STAMP := .venv/.bench-installed

$(BENCH_STAMP): $(VENV_STAMP) pyproject.toml
	.venv/bin/pip install -q -e '.[test,bench]' \
		|| echo "warning: bench extras not installed; py-spy/pyinstrument profiles skipped"
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(PY) -m bench.run $(BENCH_ARGS)

bench-quick: $(BENCH_STAMP)
	$(PY) -m bench.run --quick $(BENCH_ARGS)

lint: $(VENV_STAMP)
	.venv/bin/ruff check .

clean:
	rm -rf var/*.sqlite3* var/broker var/mail var/sms
