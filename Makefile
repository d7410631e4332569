# Everything the project needs is installed by `make install` into .venv.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install test lint train bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	JAX_PLATFORMS=cpu $(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check jaxrl tests experiments
	$(BIN)/ruff format --check jaxrl tests experiments

train: $(STAMP)
	$(BIN)/python -m jaxrl.train env=cartpole seeds=16

bench: $(STAMP)
	$(BIN)/python experiments/bench_cartpole.py

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache
