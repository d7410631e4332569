"""The trainer over a spread of small shapes, each under a hard timeout.

jaxlib 0.10.x deadlocked deterministically on some vmapped PPO programs on
multi-core CPUs (e.g. 2 seeds × 4 envs × 128 steps × 4×4 minibatches at 5,000
steps). If such a hang returns with a dependency upgrade, this test fails
after its timeout (pytest-timeout, thread method) instead of eating CI's budget.
"""

import jax
import numpy as np
import pytest

from jaxrl import parse, validate
from jaxrl.trainer.loop import make_batched, make_train, seed_keys

SHAPES = [
    # env, seeds, num_envs, num_steps, epochs, minibatches, total_timesteps, extra overrides
    ("cartpole", 2, 4, 128, 4, 4, 5000, ()),  # the shape that hung on jaxlib 0.10.2
    ("acrobot", 3, 2, 16, 2, 2, 512, ("algo.lr_schedule=adaptive", "algo.shared_torso=true", "algo.activation=relu")),
    ("pendulum", 2, 16, 4, 3, 8, 1024, ("algo.normalize_obs=true",)),
    ("Breakout-MinAtar", 2, 4, 8, 1, 2, 128, ("algo.gae_method=associative",)),
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("env, seeds, envs, steps, epochs, minibatches, total, extra", SHAPES)
def test_trainer_runs_at_shape(env, seeds, envs, steps, epochs, minibatches, total, extra):
    config = validate(
        parse(
            [
                f"env={env}",
                f"seeds={seeds}",
                f"num_envs={envs}",
                f"algo.num_steps={steps}",
                f"algo.update_epochs={epochs}",
                f"algo.num_minibatches={minibatches}",
                f"total_timesteps={total}",
                "num_evals=2",
                "eval.episodes=2",
                "eval.max_steps=50",
                *extra,
            ]
        )
    )
    trainer = make_train(config)
    init_b, chunk_b = make_batched(trainer)
    states = jax.jit(init_b)(seed_keys(config), trainer.hparams)
    chunk = jax.jit(chunk_b, donate_argnums=0)
    for _ in range(trainer.num_chunks):
        states, metrics = chunk(states, trainer.hparams)
    loss = np.asarray(jax.block_until_ready(metrics.updates.loss))
    assert loss.shape == (seeds, trainer.chunk_updates)
    assert np.all(np.isfinite(loss))
    params = jax.tree.leaves(states.agent.params)
    assert all(np.all(np.isfinite(np.asarray(p))) for p in params)
