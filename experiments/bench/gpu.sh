#!/usr/bin/env bash
# GPU benchmark (≤ 8 minutes): run on a machine with a CUDA GPU from the repo root,
#   bash experiments/bench/gpu.sh
# It installs jaxrl with the cuda and brax extras into .venv-gpu (first run only),
# then writes experiments/results/gpu/*.json and prints a summary. Each step has
# its own time limit, so one slow step cannot eat the others' time.
set -u
cd "$(dirname "$0")/../.."
OUT=experiments/results/gpu
mkdir -p "$OUT"
PY=${PYTHON:-python3}
if [ ! -x .venv-gpu/bin/python ]; then
  $PY -m venv .venv-gpu && .venv-gpu/bin/pip install --quiet -e '.[cuda,brax,bench]' || exit 1
fi
P=.venv-gpu/bin/python
export JAXRL_COMPILE_CACHE=off
$P - <<'PY' > "$OUT/device.json"
import jax, json; print(json.dumps({"devices": [str(d) for d in jax.devices()], "kind": jax.devices()[0].device_kind, "jax": jax.__version__}))
PY
cat "$OUT/device.json"
step() { local limit=$1; shift; echo "== $*"; timeout "$limit" "$@" || echo "(step failed or timed out: $*)"; }
# 1. CartPole PPO at GPU sizes: 2048 envs × {1, 16, 256} seeds, 128 steps, 4 × 4 minibatches.
step 150 $P experiments/bench/scaling.py --envs 256 2048 8192 --seeds 16 256 1024 --out "$OUT/scaling.json"
# 2. The default command and time-to-solve, as a CPU user would run them.
step 60 $P -m jaxrl.train env=cartpole seeds=16 progress=false plots=false run_dir="$OUT/cartpole16"
# 3. Ceiling: env only / acting / training vs the matmul peak.
step 60 $P experiments/bench/ceiling.py --seeds 1 16 256 --out "$OUT/ceiling.json"
# 4. GAE: associative vs sequential scan on this backend.
step 30 $P experiments/bench/gae.py --out "$OUT/gae.json"
# 5. brax: PPO ant at brax's published sizes (reduced budget), 1 and 4 seeds.
step 120 $P -m jaxrl.train env=ant seeds=4 total_timesteps=5000000 progress=false plots=false run_dir="$OUT/ant4"
step 60 $P experiments/bench/devices.py --real --devices 1 --out "$OUT/devices.json"
echo "results in $OUT"
