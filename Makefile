# Every target works from a fresh clone with only Python 3.11+ present.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
RUNTIME := $(VENV)/.runtime
STAMP := $(VENV)/.installed
PYTEST := $(BIN)/python -m pytest
# Parallel test processes: three on two cores. The suite mostly waits (about
# 4.2 CPU-minutes in all), so a third process fills the waits: 220-260 s
# against 315 s with two (quiet machine, bytecode written).
# Before the interpreters it starts read .pyc files, four processes made the
# process proofs' timing flaky. `make test WORKERS=0` runs it in one process.
# Tests go to whichever process is free (--dist load): by file, two long tests
# of one module ran in series.
WORKERS ?= 3

# Bytecode is written even where the environment sets PYTHONDONTWRITEBYTECODE
# (this machine's does): without .pyc files every interpreter compiles every
# module it imports, each time it starts. The suite starts hundreds of them
# (CLI calls, workers): one `chongming --db tasks.db ps` is 2.53 G instructions
# compiling, 0.97 G with bytecode (callgrind). __pycache__ is ignored by git.
unexport PYTHONDONTWRITEBYTECODE

# The tiers (docs/testing.md):
#   test-fast  the inner loop, <= 60 s: pure layers, the run layer on virtual
#              time, the in-memory and SQLite store contracts
#   test       everything a change can break, <= 5 min: every store
#              (PostgreSQL too), docs, browser, the proofs at reduced size
#   proofs     the fault and load proofs at the size their pass marks name
FAST_PATHS := tests/state tests/policies tests/render tests/scheduler tests/task_api \
	tests/run tests/pipeline tests/test_architecture.py \
	tests/stores/test_contract_memory.py tests/stores/test_contract_sqlite.py \
	tests/schedules/test_cadence.py tests/schedules/test_loop.py

.PHONY: install test test-fast proofs check lint typecheck docs bench demo clean

# The runtime's dependencies alone (anyio, aiosqlite, typer, read from
# pyproject.toml): all `make demo` needs, since the demo runs the checkout
# itself (PYTHONPATH). No byte-compiling at install: imports compile lazily.
RUNTIME_DEPS = $(BIN)/python -c "import tomllib; print(' '.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))"
# Where the interpreter's own pip can install into another environment
# (pip >= 22.3: --python), the venv is made without a pip of its own, which
# saves the seconds ensurepip takes; otherwise the venv gets its own pip.
OUTER_PIP := $(shell $(PYTHON) -c "import sys, pip; sys.exit(tuple(map(int, pip.__version__.split('.')[:2])) < (22, 3))" >/dev/null 2>&1 && echo yes)
ifeq ($(OUTER_PIP),yes)
VENV_FLAGS := --without-pip
PIP = $(PYTHON) -m pip --python $(BIN)/python
else
VENV_FLAGS :=
PIP = $(BIN)/python -m pip
endif
PIP_INSTALL = $(PIP) install --quiet --disable-pip-version-check

$(RUNTIME): pyproject.toml
	$(PYTHON) -m venv $(VENV_FLAGS) $(VENV)
	$(PIP_INSTALL) --no-compile $$($(RUNTIME_DEPS))
	touch $(RUNTIME)

$(STAMP): $(RUNTIME)
	$(PIP_INSTALL) -e '.[dev,postgres]'
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(PYTEST) -q -n $(WORKERS) --durations=25

test-fast: $(STAMP)
	CHONGMING_TIER=fast $(PYTEST) -q -n 2 -m "not slow and not postgres" --durations=10 $(FAST_PATHS)

proofs: $(STAMP)
	CHONGMING_PROOFS=full $(PYTEST) -q -m proof --timeout 1800 --durations=0

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

check: lint typecheck test

DOCS_STAMP := $(VENV)/.docs
$(DOCS_STAMP): $(STAMP)
	$(PIP_INSTALL) -e '.[docs]'
	touch $(DOCS_STAMP)

# The manual with its API reference, warnings as errors (mkdocs.yml: strict).
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

bench: $(STAMP)
	$(PIP_INSTALL) -e '.[dev,postgres,bench]'
	$(BIN)/python benchmarks/run_all.py

demo: $(RUNTIME)
	$(BIN)/python docs/examples/cli_demo.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .site
