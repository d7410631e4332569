"""SAC's ``algo.policy_delay`` (FastSAC's actor every 4th critic step): a
critic-only step against the full step, and the run-wide count of actor steps.
Out of ``make test-fast`` (each compiles SAC's update)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.run.overrides import parse


def same(a, b) -> bool:
    """Whether two pytrees are equal leaf for leaf, bit for bit."""

    def data(x):
        return jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x

    return all(np.array_equal(data(x), data(y)) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True))


def _sac(*overrides: str):
    from jaxrl import envs
    from jaxrl.algos import sac

    config = parse(["env=pendulum", "algo=sac", "num_envs=4", "algo.hidden_sizes=[16,16]", *overrides])
    agent = sac.make_agent(config.algo, envs.from_config(config), config.num_envs, 10)
    return config, agent, sac.HParams.from_config(config.algo)


def test_a_critic_only_sac_step_is_the_full_steps_critic_half():
    """``gradient_step(actor_step=False)`` (``algo.policy_delay``) moves the critics and their
    targets exactly as a full step does, and leaves the actor, the temperature and their
    optimizers as they were; ``actor_step`` traced true is the full step."""
    from jaxrl.algos import sac
    from jaxrl.algos.qvalue import twin_critic
    from jaxrl.envs.core import Box

    config, agent, hp = _sac("algo.learning_starts=4")
    state = jax.jit(agent.init)(jax.random.key(0), hp)
    key = jax.random.key(1)
    batch = sac.Transition(
        obs=jax.random.normal(key, (32, 3)),
        action=jax.random.uniform(jax.random.fold_in(key, 1), (32, 1), minval=-1, maxval=1),
        reward=jax.random.normal(jax.random.fold_in(key, 2), (32,)),
        next_obs=jax.random.normal(jax.random.fold_in(key, 3), (32, 3)),
        terminated=jnp.zeros(32, bool),
    )
    actor = sac.Actor(1, (16, 16))
    critic, head = twin_critic(config.algo, None, False)
    space = Box(np.full(1, -2.0, np.float32), np.full(1, 2.0, np.float32), (1,))
    noise = jax.random.normal(jax.random.fold_in(key, 4), (2, 32, 1))

    def step(flag):
        return jax.jit(
            lambda s, f: sac.gradient_step(
                s, batch, None, hp, actor, critic, space, noise=noise, head=head, actor_step=f
            )
        )(state, flag)

    full, m_full = jax.jit(
        lambda s: sac.gradient_step(s, batch, None, hp, actor, critic, space, noise=noise, head=head)
    )(state)
    traced, _ = step(jnp.bool_(True))
    held, m_held = step(jnp.bool_(False))
    assert same(traced, full)
    assert same(held.critic_params, full.critic_params) and same(held.target_params, full.target_params)
    assert same((held.actor_params, held.actor_opt, held.log_alpha, held.alpha_opt),
                (state.actor_params, state.actor_opt, state.log_alpha, state.alpha_opt))  # fmt: skip
    assert not same(full.actor_params, state.actor_params)
    assert float(m_held.actor_loss) == 0.0 and float(m_full.actor_loss) != 0.0


def test_sac_policy_delay_steps_the_actor_on_every_kth_gradient_step_of_the_run():
    """4 gradient steps per update (utd 1, 4 envs): with ``policy_delay=8`` update 0 holds
    the run's step 0 (an actor step), update 1 its steps 4–7 (none): the actor stays."""
    config, agent, hp = _sac("algo.learning_starts=4", "algo.policy_delay=8", "algo.num_steps=1")
    state = jax.jit(agent.init)(jax.random.key(0), hp)
    state, batch = jax.jit(agent.collect)(state, hp, jnp.int32(0))
    learn = jax.jit(agent.learn)
    moved, m0 = learn(state, batch, hp, jnp.int32(0))
    held, m1 = learn(moved, batch, hp, jnp.int32(1))
    assert not same(moved.actor_params, state.actor_params) and same(held.actor_params, moved.actor_params)
    assert not same(held.critic_params, moved.critic_params)
    assert float(m1.actor_loss) == 0.0 and float(m0.actor_loss) != 0.0 and float(m1.loss) != 0.0
