"""Sweeps, PBT, held-out evaluation and the report."""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl import algos, envs, parse, report, sweep, train, validate
from jaxrl.core.config import PBTConfig
from jaxrl.core.errors import ConfigError
from jaxrl.run import stats, sweeping
from jaxrl.run.checkpoint import keys_to_data
from jaxrl.run.policy import open_run
from jaxrl.run.spec import members_of, parse_perturb
from jaxrl.trainer import pbt
from tests.helpers import BITWISE_ACROSS_MEMBER_COUNTS, CARTPOLE_TINY

BASE = ["env=cartpole", "seeds=8", *CARTPOLE_TINY, "progress=false", "plots=false"]


def evals(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f if '"eval"' in line]


def test_sweep_member_equals_configuration_run_alone(tmp_path):
    """2 configurations × 8 seeds in one program: each configuration's members
    give bitwise the numbers of that configuration trained alone (8 seeds),
    where XLA allows it (tests/configs.py: BITWISE_ACROSS_MEMBER_COUNTS)."""
    sweep_dir = tmp_path / "sweep"
    assert sweeping.run([*BASE, "algo.lr=1e-3,3e-3", f"run_dir={sweep_dir}"]) == 0
    group = sweep_dir / "group-0"
    records = evals(group)
    assert len(records) == 2 and all("episode_return" in r for r in records)  # strided: one record per chunk
    with open(group / "metrics.jsonl") as f:
        assert all('"update"' not in line.split(",")[0] for line in f)
    carry = open_run(str(group)).carry
    for c, lr in enumerate(("1e-3", "3e-3")):
        alone = tmp_path / f"alone-{c}"
        assert train.main([*BASE, f"algo.lr={lr}", f"run_dir={alone}"]) == 0
        members = slice(8 * c, 8 * c + 8)
        for mine, theirs in zip(evals(alone), records, strict=True):
            assert mine["eval_return"] == theirs["eval_return"][members]
        carry_alone = open_run(str(alone)).carry
        for x, y in zip(
            jax.tree.leaves(keys_to_data(carry_alone.states)), jax.tree.leaves(keys_to_data(carry.states)), strict=True
        ):
            if BITWISE_ACROSS_MEMBER_COUNTS:
                np.testing.assert_array_equal(np.asarray(x), np.asarray(y)[members])
            else:  # float32 rounding (tests/configs.py)
                np.testing.assert_allclose(np.asarray(x), np.asarray(y)[members], rtol=1e-3, atol=1e-6)
    assert (sweep_dir / "report.md").is_file() and (sweep_dir / "report.csv").is_file()
    rows = json.loads((sweep_dir / "report.json").read_text())["rows"]
    assert {r["label"] for r in rows} == {"lr=0.001", "lr=0.003"}


def test_plan_grid_random_and_static_groups():
    grid = sweeping.plan([*BASE, "algo.lr=1e-3,3e-3", "num_envs=4,8"])
    assert len(grid.configs) == 4 and len(grid.groups) == 2  # num_envs splits the programs
    assert sorted(len(g) for g in grid.groups) == [2, 2]
    rand = sweeping.plan(
        [
            *BASE,
            "sweep.samples=5",
            "algo.lr=tag(log,interval(1e-4,1e-2))",
            "algo.ent_coef=interval(0,0.02)",
            "algo.clip_eps=0.1,0.2",
        ]
    )
    assert len(rand.configs) == 5 and len(rand.groups) == 1
    for c in rand.configs:
        assert 1e-4 <= c.algo.lr <= 1e-2 and 0 <= c.algo.ent_coef <= 0.02 and c.algo.clip_eps in (0.1, 0.2)
    again = sweeping.plan(
        [
            *BASE,
            "sweep.samples=5",
            "algo.lr=tag(log,interval(1e-4,1e-2))",
            "algo.ent_coef=interval(0,0.02)",
            "algo.clip_eps=0.1,0.2",
        ]
    )
    assert [c.algo.lr for c in again.configs] == [c.algo.lr for c in rand.configs]  # seeded


@pytest.mark.parametrize(
    "extra, field, hint",
    [
        (["algo.lrr=1e-3,3e-3"], "algo.lrr", "did you mean algo.lr"),
        (["seeds=1,2"], "seeds", "cannot be swept"),
        (["env=cartpole,acrobot"], "env", "cannot be swept"),
        (["algo.lr=interval(1e-4,1e-2)"], "algo.lr", "sweep.samples"),
        (["num_envs=interval(1,8)", "sweep.samples=2"], "num_envs", "float hyperparameter"),
        (["algo.lr=1e-3,-1"], "algo.lr", "> 0"),
        ([], "overrides", "nothing to sweep"),
    ],
)
def test_bad_sweeps_fail_before_compiling(tmp_path, capsys, extra, field, hint):
    code = sweep.main([*BASE, *extra, f"runs_root={tmp_path / 'runs'}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"error: {field}") and hint in err[0], err[0]
    assert not (tmp_path / "runs").exists()


# --- statistics -------------------------------------------------------------


def test_optimality_gap_and_probability_of_improvement_hand_computed():
    assert stats.optimality_gap([500, 400, 475, 300], 475) == pytest.approx((0 + 75 + 0 + 175) / 4)
    # x = [3, 5], y = [1, 3, 4]: pairs x>y: (3,1) (5,1) (5,3) (5,4) = 4, ties (3,3) = 0.5 → 4.5/6
    assert stats.probability_of_improvement([3, 5], [1, 3, 4]) == pytest.approx(4.5 / 6)
    lo, hi = stats.probability_of_improvement_ci([3, 5], [1, 3, 4])
    assert 0 <= lo <= 4.5 / 6 <= hi <= 1
    np.testing.assert_allclose(stats.performance_profile([1, 2, 3, 4], np.array([0, 2, 4])), [1.0, 0.5, 0.0])


def test_stratified_bootstrap_keeps_strata_sizes():
    # stratum A is constant 0 (4 runs), stratum B constant 10 (4 runs): every
    # stratified resample has the mean 5 exactly; a pooled bootstrap would not
    assert stats.stratified_bootstrap_ci([[0.0] * 4, [10.0] * 4], np.mean) == (5.0, 5.0)
    lo, hi = stats.bootstrap_ci([0.0] * 4 + [10.0] * 4, np.mean)
    assert lo < 5.0 < hi


# --- PBT --------------------------------------------------------------------


def _toy_population(p=8):
    config = validate(parse([*BASE, f"pbt.population={p}"]))
    members = members_of(config)
    from jaxrl.trainer.loop import make_batched, make_train

    trainer = make_train(config)
    init_b, _ = make_batched(trainer, hparams_batched=True)
    keys = jax.vmap(jax.random.key)(jnp.arange(p, dtype=jnp.uint32))
    return config, jax.jit(init_b)(keys, members.hparams), members.hparams


def test_pbt_exploit_copies_exactly_and_explore_stays_in_bounds():
    config, states, hps = _toy_population()
    fitness = jnp.array([5.0, 1.0, 7.0, 3.0, 8.0, 2.0, jnp.nan, 6.0])  # worst two: 6 (NaN) and 1
    cfg = PBTConfig(population=8, fraction=0.25, resample_prob=0.5, hparams=("lr", "ent_coef", "clip_eps"))
    ppo = algos.get("ppo")
    bounds, own = ppo.pbt_bounds, ppo.own_fields
    new_states, new_hps, step = jax.jit(lambda s, h, f, k: pbt.exploit_explore(s, h, f, k, cfg, bounds, own))(
        states, hps, fitness, jax.random.key(3)
    )
    parents = np.asarray(step.parents)
    assert set(np.flatnonzero(parents >= 0)) == {1, 6}
    assert set(parents[[1, 6]]) <= {4, 2}  # copied from the best two (8.0 and 7.0)
    for dst in (1, 6):
        src = int(parents[dst])
        for x, y in zip(jax.tree.leaves(new_states.agent.params), jax.tree.leaves(states.agent.params), strict=True):
            np.testing.assert_array_equal(np.asarray(x)[dst], np.asarray(y)[src])
        for x, y in zip(
            jax.tree.leaves(new_states.agent.opt_state), jax.tree.leaves(states.agent.opt_state), strict=True
        ):
            np.testing.assert_array_equal(np.asarray(x)[dst], np.asarray(y)[src])
        # own envs and PRNG stream are kept
        np.testing.assert_array_equal(np.asarray(new_states.agent.obs)[dst], np.asarray(states.agent.obs)[dst])
    for keep in (0, 2, 3, 4, 5, 7):  # untouched members are bit-identical
        for x, y in zip(jax.tree.leaves(keys_to_data(new_states)), jax.tree.leaves(keys_to_data(states)), strict=True):
            np.testing.assert_array_equal(np.asarray(x)[keep], np.asarray(y)[keep])
        assert float(new_hps.lr[keep]) == float(hps.lr[keep])
    for _ in range(20):  # explore never leaves the bounds
        _, new_hps, _ = pbt.exploit_explore(states, new_hps, fitness, jax.random.key(_), cfg, bounds, own)
        for name in cfg.hparams:
            lo, hi, _log = bounds[name]
            values = np.asarray(getattr(new_hps, name))
            assert np.all(values >= lo - 1e-12) and np.all(values <= hi + 1e-12), (name, values)


def test_pbt_lineage():
    # 3 members, 3 chunks: after chunk 0 member 2 copied 0; after chunk 1 member 0 copied 2
    parents = [[-1, -1, 0], [2, -1, -1]]
    assert pbt.lineage(parents, 0) == [0, 2, 0]
    assert pbt.lineage(parents, 1) == [1, 1, 1]
    assert pbt.lineage(parents, 2) == [0, 2, 2]


# --- held-out evaluation ----------------------------------------------------


def test_perturb_parsing_and_derived_parameters():
    env = envs.make("cartpole")
    settings = parse_perturb("length=0.25,0.5 gravity=9.8,12", env)
    assert settings == [
        {"length": 0.25, "gravity": 9.8},
        {"length": 0.25, "gravity": 12.0},
        {"length": 0.5, "gravity": 9.8},
        {"length": 0.5, "gravity": 12.0},
    ]
    params = envs.with_params(env, length=0.25)
    assert float(params.polemass_length) == pytest.approx(0.1 * 0.25)
    with pytest.raises(ConfigError, match="lenght.*parameters: .*length"):
        parse_perturb("lenght=1", env)
    with pytest.raises(ConfigError, match="must be numbers"):
        parse_perturb("length=long", env)


def test_heldout_evaluation_in_the_summary(tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert train.main([*BASE, "eval.perturb=length=0.25,1 gravity=9.8,20", f"run_dir={run_dir}"]) == 0
    assert "held-out evaluation" in capsys.readouterr().out
    rows = json.loads((run_dir / "summary.json").read_text())["heldout"]
    assert [r["label"] for r in rows] == [
        "training setting",
        "length=0.25 gravity=9.8",
        "length=0.25 gravity=20",
        "length=1 gravity=9.8",
        "length=1 gravity=20",
    ]
    assert all(len(r["configs"][0]["returns"]) == 8 for r in rows)


def test_bad_perturb_exits_2(tmp_path, capsys):
    assert train.main([*BASE, "eval.perturb=mass=2", f"runs_root={tmp_path / 'runs'}"]) == 2
    err = capsys.readouterr().err
    assert "'mass' is not a parameter of CartPole-v1" in err and not (tmp_path / "runs").exists()


# --- report -----------------------------------------------------------------


def test_report_compares_runs_and_rejects_bad_dirs(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    assert train.main([*BASE, f"run_dir={a}"]) == 0
    assert train.main([*BASE, "algo.lr=1e-2", f"run_dir={b}"]) == 0
    capsys.readouterr()
    out_dir = tmp_path / "cmp"
    assert report.main([str(a), str(b), f"out={out_dir}"]) == 0
    text = capsys.readouterr().out
    assert "| a |" in text or "| b |" in text
    for name in ("report.md", "report.csv", "report.json", "curves.png", "final_returns.png", "profiles.png"):
        assert (out_dir / name).stat().st_size > 0
    data = json.loads((out_dir / "report.json").read_text())
    assert len(data["rows"]) == 2 and len(data["probability_of_improvement"]) == 1
    assert report.main([str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_sweep_resume_equals_uninterrupted(tmp_path):
    args = [*BASE, "seeds=2", "algo.lr=1e-3,3e-3", "num_envs=4,8", "num_evals=3", "total_timesteps=3072"]
    full, parted = tmp_path / "full", tmp_path / "parted"
    assert sweeping.run([*args, f"run_dir={full}"]) == 0
    assert sweeping.run([*args, f"run_dir={parted}"], stop_after_chunks=1) == 0  # group 0 stops after chunk 1
    assert not (parted / "report.md").exists()
    assert sweep.main([f"resume={parted}"]) == 0
    for group in ("group-0", "group-1"):
        mine = [
            {k: v for k, v in r.items() if k not in ("chunk_time_s", "env_steps_per_s")} for r in evals(parted / group)
        ]
        theirs = [
            {k: v for k, v in r.items() if k not in ("chunk_time_s", "env_steps_per_s")} for r in evals(full / group)
        ]
        assert mine == theirs
    rows = [json.loads((d / "report.json").read_text())["rows"] for d in (parted, full)]
    for r in rows[0] + rows[1]:
        r.pop("source")  # the run directory itself
    assert rows[0] == rows[1]
