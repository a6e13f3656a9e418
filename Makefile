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

lint: $(VENV_STAMP)
	.venv/bin/ruff check .

clean:
	rm -rf var/*.sqlite3* var/broker var/mail var/sms
