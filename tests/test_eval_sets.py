"""Named evaluation sets (``eval.sets``): the specification, what each set
evaluates (closed-form on an env whose reward is its parameter), training left
bitwise unchanged by adding sets, and the CLI's curves, tables, gap and
``evaluate RUN_DIR eval.sets=…``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import yaml
from flax import struct

from jaxrl import envs, parse
from jaxrl.core.errors import ConfigError
from jaxrl.envs import Discrete, Env
from jaxrl.envs.randomize import Randomized, parse_randomize
from jaxrl.envs.sets import parse_sets
from jaxrl.run import stats
from jaxrl.run.logs import scalars
from jaxrl.trainer.loop import make_train
from tests.helpers import check_train_run, records, run, run_dir_of, user_env
from tests.test_readme import (
    COMMANDS,
    GEN_EVALUATE,
    GEN_NOMINAL,
    GEN_PENDULUM,
    GEN_RANDOMIZED,
    GEN_REPORT,
)

pytestmark = pytest.mark.timeout(600)


@struct.dataclass
class Knob:
    value: float = 1.0
    other: float = 0.0


class Payout(Env):
    """One-step episodes whose reward is the parameter ``value`` plus ``other``:
    an episode's return is the parameters it ran under."""

    def __init__(self):
        self.name = "Payout"
        self.obs_shape = (1,)
        self.action_space = Discrete(2)
        self.default_params = Knob()
        self.max_episode_steps = 1

    def _reset(self, key, params):
        return jnp.zeros((), jnp.int32), jnp.zeros((1,), jnp.float32)

    def _step(self, key, inner, action, params):
        obs = jnp.zeros((1,), jnp.float32)
        return inner, obs, params.value + params.other, jnp.bool_(True), jnp.bool_(False), obs


@pytest.fixture(scope="module")
def cartpole():
    return envs.make("cartpole")


def test_parse_reads_builtins_grids_and_distributions(cartpole):
    sets = parse_sets(
        "train; nominal; test: length=1.5,2 gravity=15; wide: length=uniform(0.25,2) gravity=9,11", cartpole
    )
    assert [(s.name, s.kind) for s in sets] == [
        ("train", "train"),
        ("nominal", "nominal"),
        ("test", "custom"),
        ("wide", "custom"),
    ]
    assert sets[2].points == ({"length": 1.5, "gravity": 15.0}, {"length": 2.0, "gravity": 15.0}) and not sets[2].dists
    assert sets[3].points == ({"gravity": 9.0}, {"gravity": 11.0})
    assert [(d.name, d.kind, d.values) for d in sets[3].dists] == [("length", "uniform", (0.25, 2.0))]
    assert sets[3].describe() == "wide: gravity=9,11 length=uniform(0.25,2)"
    assert parse_sets("", cartpole) == () and parse_sets("  ", cartpole) == ()


BAD = [
    ("train; train", "the set name 'train' is used twice"),
    ("test: length=2; test: length=3", "the set name 'test' is used twice"),
    ("heldout", "'heldout' is not a built-in set (train, nominal) and gives no terms"),
    ("test:", "'test' is not a built-in set"),
    ("nominal: length=2", "'nominal' is a built-in set and takes no terms"),
    ("test: lenght=2", "'lenght' is not a parameter of CartPole-v1"),
    ("test: length=uniform(2,1)", "needs two numbers lo < hi"),
    ("test: length=long", "values of length must be numbers"),
    ("test: length=1 length=uniform(1,2)", "set 'test' names 'length' twice"),
    ("my set: length=2", "'my set' is not a set name"),
    (";", "names no set"),
]


@pytest.mark.parametrize("text, expected", BAD, ids=[b[0] for b in BAD])
def test_bad_sets_name_the_field_value_constraint_and_fix(text, expected, cartpole):
    with pytest.raises(ConfigError) as error:
        parse_sets(text, cartpole)
    message = str(error.value)
    assert message.startswith(f"eval.sets={text}") and expected in message and "fix: " in message, message


def _sets_of_payout(sets: str, randomize: str = "value=uniform(0,1)", episodes: int = 64):
    """Every set of ``sets`` evaluated once on a Payout env trained over
    ``randomize``: ``{name: returns [members, points × episodes]}``."""
    base = Payout()
    env = Randomized(base, parse_randomize(randomize, base))
    sizes = ["total_timesteps=64", "num_envs=4", "num_evals=1", "algo.num_steps=8", "algo.num_minibatches=1"]
    config = parse([*sizes, "algo.update_epochs=1", f"eval.episodes={episodes}", f"eval.sets={sets}"])
    trainer = make_train(config, env=env)

    def evaluated(key):  # Payout's returns do not depend on the policy: no training needed
        state, own = trainer.evaluate(trainer.init(key, trainer.hparams))
        return own, trainer.evaluate_sets(state, own)

    own, sets = jax.jit(jax.vmap(evaluated))(jax.vmap(jax.random.key)(jnp.arange(2)))
    return {name: np.asarray(m.returns) for name, m in sets.items()}, np.asarray(own.returns)


def test_each_set_evaluates_what_it_names():
    """The train set is the training distribution's draws (the run's own
    evaluation); nominal is the env's parameters; a grid set is exactly its
    values, grid point by grid point, with unnamed parameters at their nominal
    values (never the training draws); a distribution set draws per episode."""
    sets, own = _sets_of_payout("train; nominal; test: value=3,5 other=0.5; wide: value=choice(7,9)")
    np.testing.assert_array_equal(sets["train"], own)
    assert np.all((own >= 0) & (own < 1)) and len(np.unique(own)) == own.size  # drawn per episode
    np.testing.assert_array_equal(sets["nominal"], np.ones((2, 64)))
    expected = np.concatenate([np.full(64, 3.5), np.full(64, 5.5)])
    np.testing.assert_array_equal(sets["test"], np.broadcast_to(expected, (2, 128)))
    values, counts = np.unique(sets["wide"], return_counts=True)
    np.testing.assert_array_equal(values, [7.0, 9.0])
    assert counts.min() > 20  # both drawn (128 draws, p(< 21 of either) < 1e-9)
    assert not np.array_equal(sets["wide"][0], sets["wide"][1])  # members draw from their own streams


def test_a_sets_episodes_do_not_depend_on_the_other_sets():
    """Set ``i`` draws from its own stream: the same set, first beside others
    or alone, gives the same episodes; the same specification in another place
    draws others."""
    alone, _ = _sets_of_payout("wide: value=uniform(2,3)")
    beside, _ = _sets_of_payout("wide: value=uniform(2,3); nominal; again: value=uniform(2,3)")
    np.testing.assert_array_equal(alone["wide"], beside["wide"])
    assert not np.array_equal(beside["wide"], beside["again"])


def test_the_generalization_gap_is_a_paired_bootstrap():
    """Seeds are resampled together: a constant shift of every seed has a
    zero-width interval at the shift, which an unpaired bootstrap would not."""
    rng = np.random.default_rng(0)
    train = rng.normal(100, 30, 16)
    gap = stats.paired_difference(train - 20, train)
    assert gap["gap"] == pytest.approx(-20) and gap["ci95"] == pytest.approx([-20, -20])
    noisy = stats.paired_difference(train - 20 + rng.normal(0, 5, 16), train)
    lo, hi = noisy["ci95"]
    assert lo < noisy["gap"] < hi and hi - lo < 15
    with pytest.raises(ValueError):
        stats.paired_difference(train[:3], train)


def test_dashboards_get_one_curve_per_set_and_member():
    record = {"type": "eval", "eval_return": [1.0, 2.0], "eval_sets": {"test": [3.0, None], "nominal": [4.0, 5.0]}}
    out = scalars(record, ["seed_0", "seed_1"])
    assert out["eval_sets/test/seed_0"] == 3.0 and "eval_sets/test/seed_1" not in out
    assert out["eval_sets/nominal_iqm"] == 4.5 and out["eval_sets/test_iqm"] == 3.0


TINY = ["num_envs=4", "total_timesteps=4096", "num_evals=2", "eval.episodes=4", "algo.num_steps=32"]
OWN = ["nominal", "long", "short"]  # the docs' commands' sets (docs/sweeps.md)


def cli(module: str, *args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", module, *args], capture_output=True, text=True, cwd=cwd, timeout=300, env=user_env()
    )


@pytest.fixture(scope="module")
def randomized_run(home):
    """The docs' randomized CartPole command at its CI budget."""
    proc = run(GEN_RANDOMIZED, home, COMMANDS[GEN_RANDOMIZED])
    run_dir, summary = check_train_run(proc, 16)
    return run_dir, summary, proc


def test_the_cli_tracks_every_set_at_every_evaluation(randomized_run):
    run_dir, summary, proc = randomized_run
    evals = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in evals if r["type"] == "eval"]
    assert len(evals) == 2
    for r in evals:
        assert list(r["eval_sets"]) == OWN and all(len(v) == 16 for v in r["eval_sets"].values())
    assert "· sets: nominal " in proc.stderr and ", long " in proc.stderr
    final = evals[-1]["eval_sets"]
    for name in OWN:
        block = summary["sets"][name]
        assert block["returns"] == final[name]
        assert block["iqm"] == pytest.approx(stats.iqm(final[name]))
    assert set(summary["generalization_gap"]) == set(OWN)
    gap = summary["generalization_gap"]["long"]
    assert gap["gap"] == pytest.approx(stats.iqm(final["long"]) - stats.iqm(summary["final_eval_return"]))
    lo, hi = gap["ci95"]
    assert lo <= gap["gap"] <= hi
    table = proc.stdout.split("evaluation sets", 1)[1]
    assert all(f"\n  {name} " in table for name in OWN), proc.stdout


@pytest.fixture(scope="module")
def nominal_run(home):
    proc = run(GEN_NOMINAL, home, COMMANDS[GEN_NOMINAL])
    return check_train_run(proc, 16)


def test_the_nominal_readme_command(nominal_run):
    _, summary = nominal_run
    assert list(summary["sets"]) == OWN and "randomize" not in summary["env"]


def test_adding_evaluation_sets_leaves_training_bitwise_unchanged(nominal_run, home):
    """The docs' nominal command without its eval.sets: every per-update
    metric and every evaluation of the run's own, to the bit (JSON floats are
    exact), in the CLI's default layout."""
    without = GEN_NOMINAL.split(" eval.sets=")[0]
    proc = run(without, home, COMMANDS[GEN_NOMINAL])
    plain = records(run_dir_of(proc))
    tracked = records(nominal_run[0])
    assert len(plain) == len(tracked) and any(r["type"] == "update" for r in plain)
    for a, b in zip(plain, tracked, strict=True):
        assert "eval_sets" not in a and ("eval_sets" in b) == (b["type"] == "eval")
        assert a == {k: v for k, v in b.items() if k != "eval_sets"}


def test_report_compares_runs_on_a_set(nominal_run, randomized_run, home):
    runs = {"NOMINAL_RUN": nominal_run[0], "RANDOMIZED_RUN": randomized_run[0]}
    proc = run(GEN_REPORT, home, **{k: str(v) for k, v in runs.items()})
    assert "Scored on evaluation set `long`" in proc.stdout and "P(X > Y)" in proc.stdout
    out = Path(re.findall(r"report written to (.+)$", proc.stderr, re.M)[-1])
    rows = {r["label"]: r for r in json.loads((out / "report.json").read_text())["rows"]}
    for run_dir, summary in (nominal_run, randomized_run[:2]):
        assert rows[run_dir.name]["iqm"] == pytest.approx(summary["sets"]["long"]["iqm"])
    bad = cli("jaxrl.report", str(runs["NOMINAL_RUN"]), "set=lng", cwd=home)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
    assert bad.stderr.startswith("error: set=lng: ") and "its eval.sets: nominal, long, short" in bad.stderr


def test_the_pendulum_readme_command(home):
    proc = run(GEN_PENDULUM, home, COMMANDS[GEN_PENDULUM])
    _, summary = check_train_run(proc, 4)
    assert list(summary["sets"]) == ["nominal", "long"] and "long" in summary["generalization_gap"]
    assert "l=uniform(0.7,1.6)" in summary["env"]


def test_evaluate_on_new_sets_and_replaying_the_runs_own(randomized_run, home):
    run_dir, summary, _ = randomized_run
    proc = run(GEN_EVALUATE, home, RUN_DIR=str(run_dir))
    out = json.loads((run_dir / "evaluation.json").read_text())
    assert list(out["sets"]) == ["train", "heavy", "wide"] and "\n  wide " in proc.stdout
    # train: the run's final evaluation, exactly; the others: 16 seeds each
    assert out["sets"]["train"]["returns"] == summary["final_eval_return"]
    assert set(out["generalization_gap"]) == {"heavy", "wide"}
    assert all(len(out["sets"][k]["returns"]) == 16 for k in out["sets"])
    # the run's own sets replay their final evaluation exactly
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    run(f"python -m jaxrl.evaluate {run_dir} eval.sets='{config['eval']['sets']}'", home)
    out = json.loads((run_dir / "evaluation.json").read_text())
    for name in OWN:
        assert out["sets"][name]["returns"] == summary["sets"][name]["returns"], name


@pytest.mark.parametrize(
    "module, extra",
    [("jaxrl.train", ["env=cartpole", "eval.sets=train; train"]), ("jaxrl.evaluate", ["eval.sets=test: mass=2"])],
)
def test_bad_sets_exit_2_with_one_line_and_write_nothing(module, extra, randomized_run, tmp_path):
    run_dir = randomized_run[0]
    before = sorted(p.name for p in run_dir.iterdir())
    args = [*extra, *TINY] if module == "jaxrl.train" else [str(run_dir), *extra]
    proc = cli(module, *args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: eval.sets=") and "Traceback" not in proc.stderr, lines
    assert not (tmp_path / "runs").exists() and sorted(p.name for p in run_dir.iterdir()) == before


def test_a_sweep_over_randomization_ranges_trains_each_on_its_own_env(tmp_path):
    """env.randomize values are static: one group (program) each, each group on
    the env its value names (quoted choices keep the commas inside them)."""
    ranges = ["length=uniform(0.25,1)", "length=uniform(0.25,2.5)"]
    choices = ",".join(f'"{r}"' for r in ranges)
    proc = cli(
        "jaxrl.sweep",
        "env=cartpole",
        "seeds=2",
        f"env.randomize={choices}",
        "eval.sets=long: length=1.5,2",
        *TINY,
        "eval.episodes=2",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    sweep_dir = next((tmp_path / "runs").iterdir())
    summaries = [json.loads((sweep_dir / f"group-{g}" / "summary.json").read_text()) for g in range(2)]
    for summary, spec in zip(summaries, ranges, strict=True):
        assert summary["env"] == f"CartPole-v1[randomize {spec}]"
        assert list(summary["configs"][0]["sets"]) == ["long"]
    assert summaries[0]["configs"][0]["final_eval_return"] != summaries[1]["configs"][0]["final_eval_return"]


def test_pbt_ranks_its_population_on_an_evaluation_set(tmp_path):
    """pbt.fitness=SET: at every PBT step the members that copy are the worst on
    that set and the members they copy from the best on it."""
    args = ["env=cartpole", "pbt.population=8", "pbt.interval=8", "pbt.fitness=long", "eval.sets=long: length=2"]
    proc = cli("jaxrl.train", *args, *TINY, "total_timesteps=8192", f"run_dir={tmp_path / 'run'}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ranked on eval set long" in proc.stdout
    evals = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in evals if r["type"] == "eval"]
    copies = 0
    for r in evals[:-1]:
        fitness = np.asarray(r["eval_sets"]["long"])
        parents = np.asarray(r["parents"])
        copied = parents >= 0
        if copied.any():
            copies += int(copied.sum())
            assert fitness[parents[copied]].min() >= fitness[copied].max() - 1e-3, (fitness, parents)
    assert copies > 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["pbt"]["fitness"] == "long"
    final = evals[-1]["eval_sets"]["long"]
    assert summary["pbt"]["best_final_return"] == max(final) == final[summary["pbt"]["best_member"]]
