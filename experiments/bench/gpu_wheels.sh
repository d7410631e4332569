#!/usr/bin/env bash
# Wheels for running experiments/bench/gpu.sh on a GPU machine that cannot reach
# a package index, but whose Python already has jax with GPU support and the
# common stack (flax, optax, chex, orbax-checkpoint, numpy, scipy, matplotlib,
# seaborn, pillow, pyyaml). Run here, from the repo root, after `make install`:
#   bash experiments/bench/gpu_wheels.sh [DIR] [PYTHON_VERSION]   (defaults: .wheels-gpu 3.12)
# then take DIR with the checkout to the GPU machine and run there
#   JAXRL_GPU_PYTHON=python3 JAXRL_WHEELS=DIR bash experiments/bench/gpu.sh
# The versions are those installed in this checkout's .venv (the tested ones);
# the platform is x86-64 Linux (manylinux). About 20 MB.
set -eu
cd "$(dirname "$0")/../.."
DIR=${1:-.wheels-gpu}
PYV=${2:-3.12}
P=.venv/bin/python
[ -x "$P" ] || { echo "gpu_wheels.sh: no .venv here; run make install first" >&2; exit 2; }
pins() { "$P" -c 'import importlib.metadata as m, sys; print(" ".join(f"{n}=={m.version(n)}" for n in sys.argv[1:]))' "$@"; }
mkdir -p "$DIR"
# what a CUDA jax image usually lacks: the envs (gymnax, brax with MuJoCo), hydra and their needs
"$P" -m pip download --quiet --no-deps --only-binary=:all: --python-version "$PYV" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d "$DIR" \
  $(pins gymnax gymnasium farama-notifications six hydra-core omegaconf brax mujoco mujoco-core mujoco-mjx trimesh jaxopt)
# omegaconf's parser runtime is published as a source archive only: build its pure-Python wheel
"$P" -m pip wheel --quiet --no-deps -w "$DIR" $(pins antlr4-python3-runtime)
ls "$DIR"
du -sh "$DIR"
