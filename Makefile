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

# Every benchmark of experiments/bench (≈ 50 min on 2 CPU cores); results in
# experiments/results/*.json and the Markdown table experiments/results/bench.md.
bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[dev,bench]"
	$(BIN)/python experiments/bench_cartpole.py
	$(BIN)/python experiments/bench/peers.py cartpole --runs 3
	$(BIN)/python experiments/bench/peers.py sac --seeds 1 4 16
	$(BIN)/python experiments/bench/peers.py brax
	$(BIN)/python experiments/bench/ceiling.py
	$(BIN)/python experiments/bench/learner.py
	$(BIN)/python experiments/bench/scaling.py
	$(BIN)/python experiments/bench/gae.py
	$(BIN)/python experiments/bench/time_to_solve.py
	$(BIN)/python experiments/bench/devices.py
	$(BIN)/python experiments/bench/donation.py
	$(BIN)/python experiments/bench/table.py

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache
