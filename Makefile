# Every target works from a fresh clone with only Python 3.11+ present.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test check lint typecheck bench demo clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,postgres]'
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q --durations=25

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

check: lint typecheck test

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,postgres,bench]'
	$(BIN)/python benchmarks/run_all.py

demo: $(STAMP)
	$(BIN)/python docs/examples/cli_demo.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
