# localjudge: `make run` and `make test` do all the set-up on a fresh machine.
# Both depend on `make install`, which does nothing when everything is already in place.

PYTHON      ?= python3
VENV        ?= .venv
PY          := $(VENV)/bin/python
STAMP       := $(VENV)/.localjudge-installed
LLAMA_CPP_VERSION := 0.3.36
WHEELHOUSE  ?=
# an air-gapped machine installs from a wheelhouse folder: make install WHEELHOUSE=wheelhouse
PIP_SOURCE  := $(if $(WHEELHOUSE),--no-index --find-links $(WHEELHOUSE),)
TEST_WHEELHOUSE := .localjudge/wheelhouse
# llama.cpp is built from source for this CPU (-march=native), without ggml's AMX kernels on
# x86-64: in the llama.cpp that llama-cpp-python $(LLAMA_CPP_VERSION) vendors, the compiler drops the
# AMX tile set-up, and the first batched matrix product on a CPU with AMX dies with SIGILL
# (README, "Failure behaviour"). CMake takes CFLAGS and CXXFLAGS as its C and C++ flags.
NO_AMX      := $(if $(filter x86_64 amd64 AMD64,$(shell uname -m)),-mno-amx-tile -mno-amx-int8 -mno-amx-bf16,)
LLAMA_BUILD_ENV := CFLAGS="$(strip $(CFLAGS) $(NO_AMX))" CXXFLAGS="$(strip $(CXXFLAGS) $(NO_AMX))"

.PHONY: install run test test-fast test-report lint format bench bench-serve quality install-cuda wheelhouse clean interop-deps browser-deps train-judge train-deps test-training train-sources train-sets

install: $(STAMP)
	@$(PY) -m localjudge models assemble >/dev/null

$(STAMP): pyproject.toml requirements.lock
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade $(PIP_SOURCE) pip
	$(LLAMA_BUILD_ENV) $(PY) -m pip install $(PIP_SOURCE) -c requirements.lock \
		-e '.[dev,bench,ray,serve,report,pandas]'
	@touch $(STAMP)

# The main job: evaluate examples/sample.jsonl with both scorers on the embedded model.
run: install
	@mkdir -p .localjudge && rm -f .localjudge/sample-results.jsonl
	$(PY) -m localjudge eval examples/sample.jsonl --scorer hallucination --scorer toxicity \
		--out .localjudge/sample-results.jsonl
	@echo "per-item results: .localjudge/sample-results.jsonl"

# PYTEST_ARGS: more pytest options (.ci/run adds --durations=15, so slow tests stay visible)
PYTEST_ARGS ?=
test: install $(TEST_WHEELHOUSE)/.stamp interop-deps browser-deps
	$(PY) -m pytest -q $(PYTEST_ARGS)

# The quality report page opened in a real headless browser (tests/test_report_browser.py)
test-report: install browser-deps
	$(PY) -m pytest -q -m browser

# Debian's Chromium for the browser test; a machine where it cannot be installed skips it
browser-deps:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || \
	( apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null ) || \
	echo "chromium could not be installed: the report browser test will be skipped"

# Mastra's own npm packages, for the interop test (tests/test_mastra_interop.py): pinned by
# tests/interop/package-lock.json, installed into .localjudge/interop. Skipped without node.
INTEROP := .localjudge/interop
interop-deps: $(INTEROP)/.stamp
$(INTEROP)/.stamp: tests/interop/package.json tests/interop/package-lock.json
	@if ! command -v npm >/dev/null; then echo "npm not found: the Mastra interop test will be skipped"; \
	else mkdir -p $(INTEROP) && cp tests/interop/package.json tests/interop/package-lock.json $(INTEROP)/ && \
		( cd $(INTEROP) && npm ci --no-audit --no-fund --silent && touch .stamp ) || \
		echo "npm ci failed (no npm registry here?): the Mastra interop test will be skipped"; fi

# The wheels a fresh venv needs to install localjudge's own wheel with --no-index: what the
# wheel test (tests/test_wheel.py) installs from, like an air-gapped user would.
$(TEST_WHEELHOUSE)/.stamp: $(STAMP)
	$(PY) -m pip wheel --quiet --no-build-isolation $(PIP_SOURCE) -c requirements.lock \
		--wheel-dir $(TEST_WHEELHOUSE) .
	@rm -f $(TEST_WHEELHOUSE)/localjudge-*.whl
	@touch $@

test-fast: install
	$(PY) -m pytest -q -m "not real and not wheel and not browser"

lint: install
	$(PY) -m ruff check localjudge tests training
	$(PY) -m ruff format --check localjudge tests training

format: install
	$(PY) -m ruff format localjudge tests training
	$(PY) -m ruff check --fix localjudge tests training

bench: install
	$(PY) -m localjudge bench

# Mastra's own scorers on `localjudge serve` vs the in-process scorers, same items
bench-serve: install interop-deps
	$(PY) tests/interop/bench_serve.py

quality: install
	$(PY) -m localjudge quality

# The judge adapter (training/README.md): public data -> LoRA on CPU -> GGUF -> quality with
# and without it. Its own venv (torch, transformers, peft), never part of `make install`.
# TRAIN_SOURCES: the repository snapshots listed in training/DATA.md.
TRAIN_VENV    := training/.venv
TRAIN_SOURCES ?= training/sources
# The shipped adapter's recipe (AnT; training/RESULTS.md, "The assistant-reply templates at
# full weight"): its data, then two epochs at the default seed.
TRAIN_DATA_ARGS ?= --hold-out begin --scale 1.5 --add stormfront,additions,dstc9,convabuse
TRAIN_ARGS    ?= --epochs 2
LLAMA_CPP_SRC := training/.cache/llama_cpp_python-$(LLAMA_CPP_VERSION)/vendor/llama.cpp
TUNED_ADAPTER ?= training/out/judge-lora.gguf
train-deps: $(TRAIN_VENV)/.stamp $(LLAMA_CPP_SRC)/convert_lora_to_gguf.py
$(TRAIN_VENV)/.stamp: training/requirements.txt
	@test -x $(TRAIN_VENV)/bin/python || $(PYTHON) -m venv $(TRAIN_VENV)
	$(TRAIN_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(TRAIN_VENV)/bin/python -m pip install --quiet -r training/requirements.txt
	@touch $@
$(LLAMA_CPP_SRC)/convert_lora_to_gguf.py:
	@mkdir -p training/.cache
	$(PY) -m pip download --quiet --no-deps --no-binary :all: -d training/.cache \
		llama-cpp-python==$(LLAMA_CPP_VERSION)
	tar xzf training/.cache/llama_cpp_python-$(LLAMA_CPP_VERSION).tar.gz -C training/.cache
	@touch $@

train-judge: install train-deps
	$(PY) training/make_data.py --sources $(TRAIN_SOURCES) --out training/data $(TRAIN_DATA_ARGS)
	MODEL=$$($(PY) -m localjudge models assemble gemma-3-270m | sed 's/^[^:]*: //'); \
	$(TRAIN_VENV)/bin/python training/train.py --data training/data \
		--model-dir "$$(dirname $$MODEL)" --gguf "$$(basename $$MODEL)" \
		--out training/out/adapter $(TRAIN_ARGS) && \
	$(TRAIN_VENV)/bin/python training/export.py --adapter training/out/adapter \
		--model-dir "$$(dirname $$MODEL)" --gguf "$$(basename $$MODEL)" \
		--llama-cpp $(LLAMA_CPP_SRC) --outfile $(TUNED_ADAPTER)
	$(PY) training/evaluate.py --adapter $(TUNED_ADAPTER) --data training/data \
		--out training/out/quality.json

# The --sources folder: every file training/DATA.md lists, from the repositories at its
# commits (cloned from GitHub into training/.cache/clones when not there), sha256 checked.
train-sources:
	$(PYTHON) training/get_sources.py --out $(TRAIN_SOURCES)

# The data folders RESULTS.md's recipes are judged on (git ignores them), each made as its
# section made it and checked against the saved runs that judged it.
train-sets: install train-sources
	$(PY) training/measured_sets.py --sources $(TRAIN_SOURCES)

# train.py's own tests, in the training venv (localjudge's venv has no torch and skips them)
test-training: train-deps
	$(TRAIN_VENV)/bin/python -m pytest -q -p no:cacheprovider -p no:localjudge --noconftest \
		tests/test_train_resume.py

# Same set-up, with llama.cpp built for CUDA (needs nvcc); then n_gpu_layers defaults to all.
install-cuda:
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	CMAKE_ARGS="-DGGML_CUDA=on" $(LLAMA_BUILD_ENV) $(PY) -m pip install --force-reinstall \
		--no-deps --no-cache-dir llama-cpp-python==$(LLAMA_CPP_VERSION)
	$(MAKE) install

# Every wheel the project needs (llama-cpp-python built once, the model package included),
# for `make install WHEELHOUSE=wheelhouse` on a machine without network.
wheelhouse: install
	$(LLAMA_BUILD_ENV) $(PY) -m pip wheel --wheel-dir wheelhouse -c requirements.lock '.[dev,bench,ray,serve,report,pandas]' pip setuptools wheel
	@echo "copy this repository and wheelhouse/ to the offline machine, then: make install WHEELHOUSE=wheelhouse"

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
