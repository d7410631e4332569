"""Bad input to every CLI: exit 2, one line naming the field, value,
constraint and fix, no traceback, nothing written.

Each case is what a user might type: types, ranges, sizes beyond what the
machine or the integer types hold, empty values, malformed overrides, files
where directories are expected, paths that cannot be created, corrupt run
directories. (Unknown keys, bad ranges and checkpoints: tests/test_config.py,
tests/test_cli.py.)
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from jaxrl import evaluate, export, report, sweep, train
from tests.helpers import CARTPOLE_TINY

TINY = ["env=cartpole", *CARTPOLE_TINY, "seeds=2", "progress=false", "plots=false"]
CLIS = {
    "train": train.main,
    "sweep": sweep.main,
    "evaluate": evaluate.main,
    "export": export.main,
    "report": report.main,
}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("bad") / "run"
    assert train.main([*TINY, f"run_dir={run_dir}"]) == 0
    return run_dir


CASES = [
    # integers the program's types cannot hold
    ("train", ["seed=4294967296"], "seed=4294967296: seed ids must be below 2^32"),
    ("train", ["seeds=[0,4294967296]"], "seed ids must be below 2^32"),
    ("train", ["seeds=2000000"], "seeds=2000000: at most 1,048,576 members"),
    ("train", ["total_timesteps=1e30"], "the program counts at most"),
    (
        "train",
        ["env=pendulum", "algo=sac", "algo.buffer_size=1e12"],
        "algo.buffer_size=1000000000000: must be below 2^31",
    ),
    ("train", ["eval.max_steps=1e12"], "eval.max_steps=1000000000000: must be below 2^31"),
    # numbers that pass no range check by themselves
    ("train", ["algo.lr=inf"], "algo.lr=inf: must be a finite number"),
    ("train", ["pbt.perturb_factors=[0.8,nan]"], "pbt.perturb_factors=[0.8, nan]: must hold finite numbers"),
    # PBT ranked on an evaluation set that is not there, or without a population
    ("train", ["pbt.population=4", "pbt.fitness=long"], "pbt.fitness=long: is not a set of eval.sets (its sets: none)"),
    ("train", ["pbt.fitness=long", "eval.sets=long: length=2"], "pbt.fitness=long: ranks a PBT population"),
    ("report", ["{run}", "set=long"], "set=long: "),
    # more than the machine holds
    ("train", ["algo.hidden_sizes=[100000000]", "run_dir={tmp}/huge"], "memory="),
    ("evaluate", ["{run}", "episodes=1000000000"], "memory="),
    ("evaluate", ["{run}", "episodes=10000000000"], "episodes=10000000000: must be below 2^31"),
    ("sweep", ["env=cartpole", "seeds=16", "sweep.samples=100000", "algo.lr=interval(1e-4,1e-3)"], "at most 1,048,576"),
    # malformed or empty values
    ("train", ["=3"], "has nothing before '='"),
    ("train", ["a.b.c=1"], "a.b.c=1: unknown config key"),
    ("train", ["algo.hidden_sizes=64"], "algo.hidden_sizes=64: must be a list; fix: pass algo.hidden_sizes=[64,64]"),
    ("train", ["num_envs="], "num_envs=: must be an integer"),
    ("train", ["resume="], "resume=: needs the run directory"),
    ("evaluate", [], "run_dir=(none): a run directory is needed"),
    ("export", [], "run_dir=(none): a run directory is needed"),
    ("report", [], "run_dir=(none): at least one run"),
    ("report", ["{run}", "target=nan"], "target=nan: must be a finite number"),
    # files where directories are expected, paths that cannot be made
    ("train", [*TINY, "run_dir={file}"], "is a file, not a directory"),
    ("train", [*TINY, "run_dir={file}/run"], "cannot be created"),
    ("train", [*TINY, "runs_root={file}"], "runs_root={file}: is a file, not a directory"),
    ("sweep", [*TINY, "algo.lr=1e-3,3e-3", "run_dir={file}"], "is a file, not a directory"),
    ("export", ["{run}", "out={file}"], "out={file}: is a file, not a directory"),
    ("export", ["{run}", "out={file}/policy"], "out={file}/policy: cannot be created"),
    ("report", ["{run}", "out={file}"], "out={file}: is a file, not a directory"),
    ("evaluate", ["{file}"], "does not exist"),
    ("evaluate", ["{tmp}/nope"], "does not exist"),
    ("evaluate", ["{run}", "seed=7"], "seed=7: is not in this run (seeds: [0, 1])"),
    ("evaluate", ["{run}", "episodes=0"], "episodes=0: must be a positive integer"),
    ("evaluate", ["{run}", "colour=red"], "colour=red: unknown option"),
    ("export", ["{tmp}/nope"], "does not exist"),
    ("export", ["{run}", "seed=9"], "seed=9: is not in this run"),
    # config= picks a sweep group's configuration; a train run has one
    ("evaluate", ["{run}", "config=lr=0.001"], "config=lr=0.001: is not a configuration of this run"),
    ("export", ["{run}", "seed=1", "config=lr=0.001"], "config=lr=0.001: is not a configuration of this run"),
    ("report", ["{tmp}/corrupt"], "holds unreadable results"),
    # networks and observations (issue: pixels and memory)
    ("train", ["env=memorychain", "env.params=memory_len=3"], "MemoryChain-bsuite has no parameter 'memory_len'"),
    ("train", ["env.params=gravity"], "env.params=gravity: 'gravity' is not NAME=NUMBER"),
    ("train", ["env.observe=[0,9]"], "env.observe=[0, 9]: must be indices of CartPole-v1's flattened observation"),
    (
        "train",
        ["algo=a2c", "algo.network=gru"],
        "algo.network=gru: is a recurrent torso, which algo=a2c does not train",
    ),
    ("train", ["algo.network=lru", "num_envs=6", "algo.num_minibatches=4"], "must divide num_envs=6"),
    ("train", ["algo.network=cnn"], "algo.network=cnn: needs image observations [H, W, C]"),
    ("train", ["algo.network=transformer"], "algo.network=transformer: must be one of"),
    ("train", ["algo.conv_kernels=[3,3]"], "algo.conv_kernels=[3, 3]: must have one entry per conv layer"),
    ("train", ["algo.rnn_size=0"], "algo.rnn_size=0"),
    # value-based and deterministic-policy learners (issue: PQN, DQN and TD3)
    ("train", ["env=pendulum", "algo=dqn"], "algo=dqn: needs discrete actions and Pendulum-v1 has continuous ones"),
    ("train", ["algo=td3"], "algo=td3: needs continuous actions and CartPole-v1 has discrete ones"),
    ("train", ["algo=dqn", "algo.buffer_size=64"], "algo.buffer_size=64: must hold at least one batch"),
    (
        "train",
        ["algo=dqn", "num_envs=8", "algo.n_step=5", "algo.buffer_size=32", "algo.batch_size=8"],
        "algo.n_step=5: needs a buffer of at least n_step × num_envs = 40 transitions",
    ),
    ("train", ["algo=pqn", "algo.loss=l1"], "algo.loss=l1: must be mse or huber"),
    ("train", ["algo=dqn", "algo.norm=batch"], "algo.norm=batch: must be none or layer_norm"),
    ("train", ["algo=pqn", "algo.eps_end=1.5"], "algo.eps_end=1.5: must lie in [0, 1]"),
    ("train", ["algo=pqn", "algo.q_lambda=2"], "algo.q_lambda=2.0: must lie in [0, 1]"),
    ("train", ["algo=pqn", "num_envs=6", "algo.num_minibatches=5"], "algo.num_minibatches=5: must divide the batch"),
    ("train", ["algo=dqn", "algo.tau=0"], "must lie in (0, 1]"),
    ("train", ["algo=dqn", "parallel=data"], "parallel=data: splits one run's envs over devices, which dqn does not"),
    ("train", ["env=pendulum", "algo=td3", "algo.policy_delay=0"], "algo.policy_delay=0: must be a positive integer"),
    ("train", ["env=pendulum", "algo=td3", "algo.noise_correlation=1"], "must lie in [0, 1) (0: white noise)"),
    ("train", ["env=pendulum", "algo=td3", "algo.exploration_noise=-1"], "must be ≥ 0"),
    # the fast off-policy recipe's settings (docs/distributional.md)
    ("train", ["env=pendulum", "algo=td3", "preset=fastest"], "preset=fastest: is not a named preset of"),
    ("train", ["env=pendulum", "algo=td3", "algo.noise_scales=episode"], "algo.noise_scales=episode: must be fixed"),
    (
        "train",
        ["env=pendulum", "algo=td3", "algo.noise_scales=per_env", "algo.noise_min=0.5"],
        "algo.noise_min=0.5: must be at most algo.exploration_noise=0.1",
    ),
    ("train", ["env=pendulum", "algo=sac", "algo.norm=batch_norm"], "algo.norm=batch_norm: must be none or layer_norm"),
    ("train", ["env=pendulum", "algo=sac", "algo.critic_hidden_sizes=[0]"], "algo.critic_hidden_sizes=[0]: must be"),
    ("train", ["env=pendulum", "algo=td3", "algo.weight_decay=-0.1"], "algo.weight_decay=-0.1: must be ≥ 0"),
    ("train", ["env=pendulum", "algo=td3", "algo.n_step=0"], "algo.n_step=0: must be a positive integer"),
    (
        "train",
        ["env=pendulum", "algo=sac", "algo.n_step=3", "algo.learning_starts=0", "algo.num_steps=1"],
        "algo.learning_starts=0: leaves the first update no whole 3-step window",
    ),
    (
        "train",
        ["env=gymnasium:Pendulum-v1", "algo=td3", "eval.perturb=length=0.5,1"],
        "eval.perturb=length=0.5,1: is not available on host envs",
    ),
    # domain randomization (issue: generalization)
    ("train", ["env.randomize=lenght=uniform(0.2,1)"], "'lenght' is not a parameter of CartPole-v1"),
    ("train", ["env.randomize=length=uniform(1,1)"], "uniform of length needs two numbers lo < hi"),
    ("train", ["env.randomize=length=uniform(0.2,1) length=choice(1)"], "'length' is randomized twice"),
    ("train", ["env.randomize=length=loguniform(0,1)"], "needs 0 < lo"),
]


@pytest.mark.parametrize("cli, argv, expected", CASES, ids=[f"{c}-{' '.join(a)[:40]}" for c, a, _ in CASES])
def test_bad_input_exits_2_with_one_line_and_writes_nothing(cli, argv, expected, finished, tmp_path, capsys):
    file = tmp_path / "file.txt"
    file.write_text("not a directory")
    (tmp_path / "corrupt").mkdir()
    (tmp_path / "corrupt" / "summary.json").write_text("{not json")
    before = {p: p.stat().st_mtime_ns for p in finished.rglob("*")}
    subs = {"{run}": str(finished), "{file}": str(file), "{tmp}": str(tmp_path)}
    for key, value in subs.items():
        argv = [a.replace(key, value) for a in argv]
        expected = expected.replace(key, value)
    capsys.readouterr()
    assert CLIS[cli](argv) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "fix: " in lines[0], err
    assert expected in lines[0], lines[0]
    assert "Traceback" not in out + err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corrupt", "file.txt"]  # nothing written here
    assert {p: p.stat().st_mtime_ns for p in finished.rglob("*")} == before  # nor into the run


def test_brax_chatter_stays_off_the_terminal(tmp_path):
    """An error after brax is imported is still one line: brax's warnings and
    mujoco's "Failed to import warp" never reach stdout or stderr."""
    pytest.importorskip("brax")
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    proc = subprocess.run(
        [sys.executable, "-m", "jaxrl.train", "env=ant", "seeds=3", "devices=4", f"run_dir={tmp_path / 'run'}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 2
    assert proc.stdout == "" and len(proc.stderr.strip().splitlines()) == 1, (proc.stdout, proc.stderr)
    assert proc.stderr.startswith("error: devices=4") and not (tmp_path / "run").exists()
