# Everything the project needs is installed into .venv by its own targets:
# `make install` (and `make train`) the package alone, `make test` (and `make
# lint`, `make bench`, `make docs`) the package with its dev extras. `make docs`
# builds the documentation site (mkdocs.yml, docs/) into site/.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
CORE   := $(VENV)/.installed
DEV    := $(VENV)/.installed-dev

.PHONY: install install-dev test test-fast test-learning lint train docs bench clean

$(CORE): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $(CORE)

$(DEV): $(CORE)
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(DEV)

install: $(CORE)

install-dev: $(DEV)

# Two workers, each taking whole modules (their module-scoped runs stay shared):
# most tests wait on one-threaded XLA compiles, so two keep both cores busy (a third
# adds nothing: the suite is CPU-bound). Right after it, `python experiments/suite_costs.py`
# splits its runs' time into compiling, training and the rest, per test.
test: $(DEV)
	JAX_PLATFORMS=cpu $(BIN)/python -m pytest -q -n 2 --dist loadscope

# The inner-loop tier (< 3 min on 2 cores): the pure pieces against their oracles
# (plain loops, closed forms, distrax), the config and architecture contracts, the
# algorithm seam, and the CLI end to end on tiny runs (resume, damaged checkpoints).
FAST := tests/test_advantages.py tests/test_distributions.py tests/test_normalize.py \
	tests/test_optim.py tests/test_packing.py tests/test_stats.py tests/test_shuffle.py \
	tests/test_recurrent.py tests/test_config.py tests/test_architecture.py \
	tests/test_lineage.py tests/test_env_backend.py \
	tests/test_algorithm_seam.py tests/test_cli.py tests/test_vtrace.py \
	tests/test_distributional.py tests/test_distributional_learners.py \
	tests/test_prioritized.py tests/test_rainbow.py tests/test_fast_offpolicy.py
test-fast: $(DEV)
	JAX_PLATFORMS=cpu $(BIN)/python -m pytest -q -n 2 --dist loadscope $(FAST)

# The learning tier: the documented commands that make test runs at smoke budgets
# (tests/test_readme.py's CI_BUDGETS), at the budgets where their learning floors hold.
LEARNING := tests/test_readme.py tests/test_value_readme.py tests/test_host_envs.py
test-learning: $(DEV)
	JAXRL_TESTS=learning JAX_PLATFORMS=cpu $(BIN)/python -m pytest -q -n 2 --dist loadscope $(LEARNING)

lint: $(DEV)
	$(BIN)/ruff check jaxrl tests experiments
	$(BIN)/ruff format --check jaxrl tests experiments
	$(BIN)/lint-imports

train: $(CORE)
	$(BIN)/python -m jaxrl.train env=cartpole seeds=16

# The documentation site, as CI builds it (tests/test_docs.py): warnings are errors.
docs: $(DEV)
	$(BIN)/mkdocs build --strict

# Every benchmark of experiments/bench (≈ 50 min on 2 CPU cores); results in
# experiments/results/*.json and the Markdown table experiments/results/bench.md.
bench: $(DEV)
	$(BIN)/python -m pip install --quiet -e ".[dev,bench]"
	$(BIN)/python experiments/bench_cartpole.py
	$(BIN)/python experiments/bench/peers.py cartpole --runs 3
	$(BIN)/python experiments/bench/peers.py sac --seeds 1 4 16
	$(BIN)/python experiments/bench/peers.py value
	$(BIN)/python experiments/bench/peers.py brax
	$(BIN)/python experiments/bench/ceiling.py
	$(BIN)/python experiments/bench/learner.py
	$(BIN)/python experiments/bench/scaling.py
	$(BIN)/python experiments/bench/gae.py
	$(BIN)/python experiments/bench/time_to_solve.py
	$(BIN)/python experiments/bench/devices.py
	$(BIN)/python experiments/bench/donation.py
	$(BIN)/python experiments/bench/pixels_memory.py
	$(BIN)/python experiments/bench/generalization.py
	$(BIN)/python experiments/bench/suites.py
	$(BIN)/python experiments/bench/launchers.py
	$(BIN)/python experiments/bench/table.py

clean:
	rm -rf $(VENV) runs site .pytest_cache .ruff_cache
