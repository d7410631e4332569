"""IMPALA (algo=impala): its loss against one built from rlax's V-trace, the
docs' CartPole command in-program, and its learner fed by lagging actors on a
host env (importance weights away from 1)."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import rlax

from jaxrl import make_train, parse, train, validate
from jaxrl.algos.actor_critic import ActorCriticState, Transition, distribution, log_prob
from jaxrl.algos.impala import impala_loss
from tests.helpers import check_train_run, run
from tests.test_readme import COMMANDS

IMPALA_CARTPOLE = "python -m jaxrl.train env=cartpole algo=impala seeds=16"


def test_the_loss_is_the_one_rlax_vtrace_gives():
    """Off-policy behaviour log-probs, terminations, no truncation: the loss
    equals −E[log π · A] + c_V ½ E[(v_s − V)²] − c_H E[H] with rlax's V-trace
    (vmapped over envs) for A and v_s."""
    config = validate(parse(["env=cartpole", "algo=impala", "num_envs=3", "algo.num_steps=7", "algo.ent_coef=0.02"]))
    trainer = make_train(config)
    agent, hp = trainer.agent, trainer.hparams
    state = agent.init(jax.random.key(0), hp)
    rng = np.random.default_rng(0)
    t, n = 7, 3
    states = rng.normal(0, 0.5, (t + 1, n, 4)).astype(np.float32)
    obs = states[:-1]
    terminated = rng.random((t, n)) < 0.2
    # the pre-reset next observation: the next step's where nothing ended, a terminal one where it did
    final = np.where(terminated[..., None], rng.normal(0, 0.5, (t, n, 4)), states[1:]).astype(np.float32)
    steps = Transition(
        obs=obs,
        action=rng.integers(0, 2, (t, n)).astype(np.int32),
        log_prob=np.log(rng.uniform(0.2, 0.8, (t, n))).astype(np.float32),
        value=None,
        next_value=None,
        reward=rng.normal(0, 1, (t, n)).astype(np.float32),
        terminated=terminated,
        truncated=np.zeros((t, n), bool),
        final_obs=final,
        episode_return=np.zeros((t, n), np.float32),
        episode_length=np.zeros((t, n), np.int32),
    )
    assert isinstance(state, ActorCriticState)
    total, _ = impala_loss(state.params, agent.network, state, steps, hp, config.algo)

    net = agent.network
    policy_out, value = net.apply(state.params, obs)
    dist = distribution(net, state.params, policy_out)
    logp = log_prob(dist, steps.action)
    _, next_value = net.apply(state.params, final)  # V(s_{t+1}) (rlax's v_t)
    discount = hp.gamma * (1.0 - terminated.astype(np.float32))

    def one(v, v_next, r, d, rho):
        return rlax.vtrace_td_error_and_advantage(v, v_next, r, d, rho, 1.0, 1.0, 1.0)

    ref = jax.vmap(one, in_axes=1, out_axes=1)(
        value, next_value, steps.reward, discount, jnp.exp(logp - steps.log_prob)
    )
    expected = (
        -jnp.mean(logp * ref.pg_advantage)
        + hp.vf_coef * 0.5 * jnp.mean(jnp.square(ref.errors))
        - hp.ent_coef * jnp.mean(dist.entropy())
    )
    np.testing.assert_allclose(float(total), float(expected), rtol=1e-5)


def test_the_cartpole_command_learns(home):
    """The docs' command in-program at a CI budget: well above random play (≈ 22)."""
    _, summary = check_train_run(run(IMPALA_CARTPOLE, home, COMMANDS[IMPALA_CARTPOLE]), 4)
    assert summary["iqm"] >= 150, summary["final_eval_return"]


def test_lagging_actors_on_a_host_env(tmp_path):
    """On gymnasium's CartPole with actors up to 2 updates behind, the learner
    weighs their steps by π/μ (mean_rho logged, ≠ 1 once the policy moves)."""
    run_dir = tmp_path / "run"
    args = ["env=gymnasium:CartPole-v1", "algo=impala", "seeds=2", "num_envs=4", "total_timesteps=8000"]
    assert train.main([*args, "actor.max_lag=2", "num_evals=2", "eval.episodes=2", f"run_dir={run_dir}"]) == 0
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    updates = [r for r in rows if r["type"] == "update"]
    assert max(r["pipeline"]["lag_max"] for r in updates) <= 2
    rhos = np.asarray([r["mean_rho"] for r in updates])
    assert np.all(np.isfinite(rhos)) and np.any(np.abs(rhos - 1.0) > 1e-4)


def test_no_prng_key_reuse_and_resume_equals_uninterrupted(tmp_path):
    """The compiled IMPALA program consumes every key once (jax.debug_key_reuse),
    and a run stopped after its first chunk and resumed gives the uninterrupted numbers."""
    from jaxrl.run import training
    from jaxrl.run.overrides import resolve
    from jaxrl.trainer.loop import make_batched, seed_keys

    small = ["env=cartpole", "algo=impala", "seeds=2", "num_envs=4", "total_timesteps=1600", "num_evals=2"]
    config = validate(parse([*small, "eval.episodes=2", "algo.normalize_obs=true"]))
    trainer = make_train(config)
    init_b, chunk_b = make_batched(trainer)
    with jax.debug_key_reuse(True):
        states = jax.jit(init_b)(seed_keys(config), trainer.hparams)
        jax.jit(chunk_b)(states, trainer.hparams)

    def records(run_dir):
        rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        return [{k: v for k, v in r.items() if k not in ("chunk_time_s", "env_steps_per_s")} for r in rows]

    args = [*small, "eval.episodes=2", "progress=false", "plots=false"]
    assert training.run(resolve([*args, f"run_dir={tmp_path / 'full'}"])) == 0
    assert training.run(resolve([*args, f"run_dir={tmp_path / 'parted'}"]), stop_after_chunks=1) == 0
    assert train.main([f"resume={tmp_path / 'parted'}"]) == 0
    assert records(tmp_path / "parted") == records(tmp_path / "full")
