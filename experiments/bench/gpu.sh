#!/usr/bin/env bash
# GPU benchmark (≤ 8 minutes): run on a machine with a CUDA GPU from the repo root,
#   bash experiments/bench/gpu.sh
# It writes experiments/results/gpu/*.json and prints a summary. Each step has
# its own time limit, so one slow step cannot eat the others' time.
#
# Python environment, one of:
#   (default)            .venv-gpu, created on the first run and filled from the
#                        package index with jaxrl[cuda,brax,bench];
#   JAXRL_GPU_PYTHON=P   an existing Python P that already has jax with GPU
#                        support (a CUDA image's, say); with JAXRL_WHEELS=DIR the
#                        packages it lacks are installed offline from the wheels
#                        in DIR (made beforehand, on a machine that reaches the
#                        index, by experiments/bench/gpu_wheels.sh) into
#                        .gpu-site, which goes first on PYTHONPATH; P's own
#                        site-packages are not touched.
# JAXRL_GPU_SMOKE=1 runs every step at tiny sizes on any backend (seconds each):
# a check of the script itself, not a benchmark.
# JAXRL_GPU_SUITE=minatar runs, instead of the steps below, the MinAtar CNN
# presets at their full 10M env steps on 4 seeds (one game per step, 25 minutes
# each at most: a session with more than 8 minutes of GPU) and
# experiments/bench/pixels_memory.py.
set -u
cd "$(dirname "$0")/../.."
OUT=experiments/results/gpu
SMOKE=${JAXRL_GPU_SMOKE:-0}
if [ "$SMOKE" = 1 ]; then OUT=experiments/results/gpu-smoke; fi
die() { echo "gpu.sh: $*" >&2; exit 2; }
if [ -n "${JAXRL_GPU_PYTHON:-}" ]; then
  P=$JAXRL_GPU_PYTHON
  command -v "$P" >/dev/null || die "JAXRL_GPU_PYTHON=$P is not an executable Python; give the path of one whose jax has GPU support"
  if [ -n "${JAXRL_WHEELS:-}" ]; then
    compgen -G "$JAXRL_WHEELS/*.whl" >/dev/null || die "JAXRL_WHEELS=$JAXRL_WHEELS holds no .whl files; make them with experiments/bench/gpu_wheels.sh"
    "$P" -m pip install --quiet --no-index --no-deps --no-compile --upgrade --target .gpu-site "$JAXRL_WHEELS"/*.whl \
      || die "installing the wheels in $JAXRL_WHEELS into .gpu-site failed (pip's message above); remake them for this Python's version"
  fi
  export PYTHONPATH="$PWD/.gpu-site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
  if [ ! -x .venv-gpu/bin/python ]; then
    ${PYTHON:-python3} -m venv .venv-gpu && .venv-gpu/bin/pip install --quiet -e '.[cuda,brax,bench]' || exit 1
  fi
  P=.venv-gpu/bin/python
fi
export JAXRL_COMPILE_CACHE=off
INFO=$(mktemp)
JAXRL_GPU_SMOKE=$SMOKE "$P" - <<'PY' > "$INFO" || { cat "$INFO"; rm -f "$INFO"; exit 2; }
import importlib.metadata as md, json, os, sys
import jax
versions = {}
for name in ("jax", "jaxlib", "flax", "optax", "chex", "orbax-checkpoint", "gymnax", "hydra-core", "brax", "mujoco"):
    try:
        versions[name] = md.version(name)
    except md.PackageNotFoundError:
        versions[name] = None
info = {"devices": [str(d) for d in jax.devices()], "kind": jax.devices()[0].device_kind,
        "backend": jax.default_backend(), "python": sys.version.split()[0], "versions": versions}
print(json.dumps(info))
missing = [name for name, v in versions.items() if v is None]
if missing:
    print(f"gpu.sh: packages missing: {', '.join(missing)}; install them, or pass JAXRL_WHEELS=DIR "
          "(experiments/bench/gpu_wheels.sh)", file=sys.stderr)
    sys.exit(2)
if jax.default_backend() != "gpu" and os.environ["JAXRL_GPU_SMOKE"] != "1":
    print(f"gpu.sh: jax sees no GPU (backend {jax.default_backend()}); these would be CPU figures. "
          "Use a Python whose jax has GPU support, or JAXRL_GPU_SMOKE=1 to check the script", file=sys.stderr)
    sys.exit(2)
PY
mkdir -p "$OUT" && mv "$INFO" "$OUT/device.json" && cat "$OUT/device.json"
step() { local limit=$1; shift; echo "== $*"; timeout "$limit" "$@" || echo "(step failed or timed out: $*)"; }
if [ "$SMOKE" = 1 ]; then
  SCALING=(--envs 4 --seeds 1); MAIN=(seeds=2 total_timesteps=20000); CEILING=(--seeds 1)
  ANT=(seeds=1 num_envs=16 algo.num_steps=8 total_timesteps=2048 num_evals=1 eval.episodes=1); DEVICES=(--devices 1)
else
  SCALING=(--envs 256 2048 8192 --seeds 16 256 1024); MAIN=(seeds=16); CEILING=(--seeds 1 16 256)
  ANT=(seeds=4 total_timesteps=5000000); DEVICES=(--devices 1)
fi
if [ "${JAXRL_GPU_SUITE:-}" = minatar ]; then
  if [ "$SMOKE" = 1 ]; then MINATAR=(seeds=1 total_timesteps=16384 num_evals=1 eval.episodes=2); PM=(--steps 16384 --seeds 1 --lengths 8)
  else MINATAR=(seeds=4); PM=(); fi
  for game in Breakout Asterix Freeway SpaceInvaders Seaquest; do
    step 1500 "$P" -m jaxrl.train env="$game-MinAtar" "${MINATAR[@]}" progress=false run_dir="$OUT/minatar-$game"
  done
  step 600 "$P" experiments/bench/pixels_memory.py "${PM[@]}" --out "$OUT/pixels_memory.json"
  echo "results in $OUT"
  exit 0
fi
# 1. CartPole PPO at GPU sizes: envs × seeds, 128 steps, 4 × 4 minibatches.
step 150 "$P" experiments/bench/scaling.py "${SCALING[@]}" --out "$OUT/scaling.json"
# 2. The default command, as a CPU user would run it.
step 60 "$P" -m jaxrl.train env=cartpole "${MAIN[@]}" progress=false plots=false run_dir="$OUT/cartpole16"
# 3. Ceiling: env only / acting / training vs the matmul peak.
step 60 "$P" experiments/bench/ceiling.py "${CEILING[@]}" --out "$OUT/ceiling.json"
# 4. GAE: associative vs sequential scan on this backend.
step 30 "$P" experiments/bench/gae.py --out "$OUT/gae.json"
# 5. brax: PPO ant at brax's published sizes (reduced budget), 4 seeds.
step 120 "$P" -m jaxrl.train env=ant "${ANT[@]}" progress=false plots=false run_dir="$OUT/ant4"
step 60 "$P" experiments/bench/devices.py --real "${DEVICES[@]}" --out "$OUT/devices.json"
echo "results in $OUT"
