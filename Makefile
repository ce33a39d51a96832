# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
HOME_DIR ?= data
UI_PORT ?= 4200
# `prefect` commands of deploy/worker talk to the server `make ui` runs (not a temporary one).
PREFECT_API := http://127.0.0.1:$(UI_PORT)/api
export PREFECT_SERVER_ANALYTICS_ENABLED := false

.PHONY: install demo test ui deploy worker bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	touch $(STAMP)

$(TEST_STAMP): $(STAMP) pyproject.toml
	$(PY) -m pip install -q -e ".[test]"
	touch $(TEST_STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/finhallu build --profile demo --home $(HOME_DIR)

test: $(TEST_STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks
	$(VENV)/bin/mypy
	$(PY) -m pytest -q -n 2 --dist loadgroup --durations=15

ui: $(STAMP)
	$(VENV)/bin/finhallu ui --home $(HOME_DIR) --port $(UI_PORT)

# Needs `make ui` running (another terminal): creates the work pool and the deployments of prefect.yaml.
deploy: $(STAMP)
	@$(PY) -c "import sys, urllib.request; urllib.request.urlopen('$(PREFECT_API)/health', timeout=5)" 2>/dev/null \
		|| { echo "no Prefect server on $(PREFECT_API): start it with 'make ui' first" >&2; exit 2; }
	PREFECT_API_URL=$(PREFECT_API) $(VENV)/bin/prefect work-pool create finhallu-local --type process --overwrite
	PREFECT_API_URL=$(PREFECT_API) $(VENV)/bin/prefect --no-prompt deploy --all

# Runs the scheduled and triggered deployment runs (Ctrl-C stops it; WORKER_ARGS=--run-once polls once).
WORKER_ARGS ?=
worker: $(STAMP)
	PREFECT_API_URL=$(PREFECT_API) $(VENV)/bin/prefect worker start --pool finhallu-local $(WORKER_ARGS)

bench: $(TEST_STAMP)
	$(PY) benchmarks/demo_build.py

clean:
	-test -x $(VENV)/bin/finhallu && $(VENV)/bin/finhallu stop-api --home $(HOME_DIR)
	rm -rf $(HOME_DIR)
