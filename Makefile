# Frontier Bench — the two commands (see README.md):
#   make run    run the suite on the embedded default (or PARAMS=params/<file>.yaml), then the paper
#   make test   run the tests (.ci/run calls exactly this)
# Both create .venv and install what they need; installs are redone only when pyproject.toml changes.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PARAMS ?= params/embedded.yaml
ARGS   ?=

.PHONY: run test paper validate bench clean-outputs notebooks

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# llama-cpp-python compiles llama.cpp from source on first install (~6 min on 2 cores; pip caches the wheel).
$(VENV)/.installed-run: pyproject.toml | $(PY)
	@echo "Installing frontier-bench with the embedded server (first time: llama-cpp-python compiles, ~6 min)…"
	$(PY) -m pip install --quiet --progress-bar off -e '.[embedded]'
	@touch $@

$(VENV)/.installed-test: pyproject.toml | $(PY)
	@echo "Installing frontier-bench with test and embedded extras (first time: llama-cpp-python compiles, ~6 min)…"
	$(PY) -m pip install --quiet --progress-bar off -e '.[embedded,dev]'
	@touch $@ $(VENV)/.installed-run

run: $(VENV)/.installed-run
	$(PY) -m benchlib.cli run $(PARAMS) $(ARGS)

test: $(VENV)/.installed-test
	$(PY) -m pytest -q -ra $(ARGS)

paper: $(VENV)/.installed-run
	$(PY) -m benchlib.cli paper

validate: $(VENV)/.installed-run
	$(PY) -m benchlib.cli validate $(PARAMS)

bench: $(VENV)/.installed-test
	$(PY) bench/measure_accuracy.py
	$(PY) bench/telemetry_overhead.py

notebooks: $(VENV)/.installed-run
	$(PY) tools/make_notebooks.py

clean-outputs:
	rm -rf outputs/*/ paper/out/
