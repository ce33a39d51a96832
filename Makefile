# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
HOME_DIR ?= data
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
	$(PY) -m pytest -q

ui: $(STAMP)
	$(VENV)/bin/finhallu ui --home $(HOME_DIR)

bench: $(TEST_STAMP)
	$(PY) benchmarks/demo_build.py

clean:
	-test -x $(VENV)/bin/finhallu && $(VENV)/bin/finhallu stop-api --home $(HOME_DIR)
	rm -rf $(HOME_DIR)
