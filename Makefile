# npulab: `make run` starts the platform, `make test` runs the tests.
.DEFAULT_GOAL := help
SHELL := /bin/bash

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Runs on this machine's CPU need torch in the worker's interpreter. An exact
# version keeps the installer from resolving a newer (multi-GB CUDA) build.
TORCH ?= torch==2.13.0
# The interpreter for `framework: mindspore` runs: an environment of its own, since the
# MindSpore wheel is built against NumPy 1.x (with NumPy 2 Tensor arithmetic raises
# SystemError) while the platform's numpy is 2.x (docs/mindspore.md).
MINDSPORE ?= mindspore==2.10.0
MS_VENV ?= .venv-mindspore
UV_RELEASE ?= uv==0.13.9
UV := $(VENV)/bin/uv
# Run by the interpreter to install into.
INSTALL := deploy/uv_pip_install.py $(UV)
# The checkout's own bytecode, written before the processes start: the runs' users cannot
# write it into the checkout, nor can anything where PYTHONDONTWRITEBYTECODE is set (as on
# some CI machines), so each process would compile what it imports again: 0.05-0.2 CPU-s a
# process (a run's supervisor, a host worker, the CLI, Django), for 1 s once.
BYTECODE := $(PY) -m compileall -q
PORT ?= 8000
# Local CPU host workers `make run` starts (HOSTS=2: runs across hosts on one machine).
HOSTS ?= 1
PYTEST_ARGS ?=
# One pytest process per core (pytest-xdist); a test module stays in one process, so its
# module-scoped stacks start once. The files go out in the order tests/conftest.py gives
# them (the end-to-end ones first), not pytest-xdist's (most tests first).
# TEST_WORKERS=0 runs everything in this process.
TEST_WORKERS ?= auto
# schemathesis makes an item per API operation only in a process of its own: under xdist its
# tests ran as one item each. That process runs beside the rest, on a Redis db of its own
# (the rest's workers take 15, 13, ...), and its output follows theirs (PYTEST_ARGS is for
# the rest).
FUZZ_TESTS := tests/schema/test_schemathesis.py
FUZZ_REDIS_DB := 6
# The REST API's last release: `make lint` fails on a change that breaks its clients.
API_RELEASE ?= docs/api-releases/0.1.0.yaml

.PHONY: help run test test-deps lint fmt schema bench vendor clean mindspore

help:
	@echo "make run      start web, control worker, embedded Redis and a CPU host worker"
	@echo "make test     install test dependencies and run the tests"
	@echo "make test-deps  only install them (.venv and $(MS_VENV), side by side)"
	@echo "make mindspore  prepare $(MS_VENV), the interpreter for framework: mindspore runs"
	@echo "make lint     ruff, Python 3.8 check of workers/, import layers, Django checks, migrations, schema and its compatibility"
	@echo "make fmt      format the code"
	@echo "make schema   regenerate docs/openapi.yaml"
	@echo "make bench    run the benchmarks in bench/ (results: docs/benchmarks.md)"
	@echo "make vendor   fetch the vendored front-end libraries again from npm"

# uv installs (deploy/uv_pip_install.py: under this machine's pip settings); pip only
# installs uv itself.
$(UV):
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet "$(UV_RELEASE)"

# An interpreter that has torch keeps it (an NPU host's torch matches its torch_npu).
# The local CPU worker's runs use this interpreter: coverage runs read PyTorch's operator
# database, which imports expecttest. One install for all of it: uv compiles the bytecode
# of the whole environment after each install, torch's 0.7 GB included.
RUN_REQUIREMENTS = $$($(PY) -c "import torch" 2>/dev/null || echo "$(TORCH) numpy") expecttest

$(VENV)/.run-deps: pyproject.toml $(UV)
	$(PY) $(INSTALL) $(RUN_REQUIREMENTS) -e .
	touch $@

$(MS_VENV)/.deps: $(UV)
	test -x $(MS_VENV)/bin/python || $(PYTHON) -m venv $(MS_VENV)
	$(MS_VENV)/bin/python $(INSTALL) "$(MINDSPORE)" "numpy<2"
	$(UV) pip check --quiet --python $(MS_VENV)/bin/python
	touch $@

mindspore: $(MS_VENV)/.deps

# What the tests need includes what `make run` needs, in the same one install.
$(VENV)/.test-deps: pyproject.toml $(UV)
	$(PY) $(INSTALL) $(RUN_REQUIREMENTS) -e ".[dev,parity]"
	touch $@ $(VENV)/.run-deps

# Written aside and moved, so that a failed write never leaves an empty key behind.
var/secret_key:
	mkdir -p var
	umask 077 && python3 -c "import secrets; print(secrets.token_urlsafe(50))" > $@.new
	mv $@.new $@

# As root, each run executes as a user of its own, one of the pool npulab-run-0 … (made
# here, let through to each local host's runs; NPULAB_RUN_USER_POOL sets its size), never
# as root (docs/security.md). var/ and the work directories are private before the users
# are let through them: the stack keeps var/ so, and an entry granted while they were open
# to all would be missing. The local CPU hosts take framework: mindspore runs when `make
# mindspore` has been run.
run: $(VENV)/.run-deps var/secret_key
	@if [ "$$(id -u)" = 0 ]; then \
		for dir in var/worker $(foreach n,$(shell seq 2 $(HOSTS)),var/worker-$(n)); do \
			mkdir -p -m 700 $$dir/runs && chmod o-rwx var $$dir \
			&& $(PY) -m workers.host.runuser $(PY) $$dir/runs || exit 1; \
		done; fi
	$(BYTECODE) platform workers manage.py
	$(PY) manage.py standalone --port $(PORT) \
		$$(test -x $(MS_VENV)/bin/python && echo --mindspore-python $(abspath $(MS_VENV))/bin/python) --hosts $(HOSTS)

# Both environments, side by side.
test-deps:
	@$(MAKE) --no-print-directory -j 2 --output-sync=target $(VENV)/.test-deps $(MS_VENV)/.deps

test: test-deps
	@mkdir -p var
	$(BYTECODE) platform workers harness tests manage.py
	NPULAB_TEST_REDIS_DB=$(FUZZ_REDIS_DB) $(PY) -m pytest -p no:xdist $(FUZZ_TESTS) \
		> var/fuzz.log 2>&1 & fuzz=$$!; trap 'kill $$fuzz 2>/dev/null' INT TERM; \
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --ignore=$(FUZZ_TESTS) $(PYTEST_ARGS); \
	rest=$$?; wait $$fuzz; fuzzed=$$?; \
	echo "--- $(FUZZ_TESTS) (beside the rest):"; cat var/fuzz.log; \
	test $$rest = 0 && test $$fuzzed = 0

lint: $(VENV)/.test-deps var/secret_key
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/vermin --no-tips --violations --target=3.8- workers/
	PYTHONPATH=platform:. $(VENV)/bin/lint-imports
	$(PY) manage.py check --fail-level WARNING
	$(PY) manage.py makemigrations --check --dry-run
	$(PY) manage.py spectacular --validate --fail-on-warn | diff -u docs/openapi.yaml - \
		|| (echo "docs/openapi.yaml is stale: make schema" && false)
	$(PY) manage.py api_compat $(API_RELEASE)

fmt: $(VENV)/.test-deps
	$(PY) -m ruff check --fix .
	$(PY) -m ruff format .

schema: $(VENV)/.run-deps var/secret_key
	$(PY) manage.py spectacular --validate --fail-on-warn --file docs/openapi.yaml

bench: $(VENV)/.test-deps var/secret_key
	$(PY) bench/dispatch.py
	$(PY) bench/snapshots.py
	$(PY) bench/training.py
	$(PY) bench/coverage.py
	$(PY) bench/coverage_page.py

vendor:
	bash platform/npulab/core/static/vendor/fetch.sh

clean:
	rm -rf $(VENV) var staticfiles .pytest_cache .ruff_cache .grimp_cache .import_linter_cache
