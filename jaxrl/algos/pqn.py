"""Parallelised Q-Network (PQN; Gallici et al., 2024, "Simplifying Deep Temporal
Difference Learning", arXiv:2407.04811).

Q-learning without a replay buffer or a target network: ``N`` vectorized envs act
ε-greedily for ``T`` steps, Peng's Q(λ) targets are computed over the rollout
(:func:`jaxrl.rl.q_lambda`: the GAE recurrence with ``V = max_a Q``, the
truncation bootstrap from the pre-reset final observation), and the Q-network —
LayerNorm before every activation, which is what keeps it stable without a
target network — regresses them for ``update_epochs × num_minibatches`` steps
(the on-policy epoch driver, :func:`jaxrl.algos.onpolicy.run_epochs`).

Pure pieces: :func:`~jaxrl.algos.qvalue.q_loss` (on a minibatch),
:func:`rollout`, :func:`targets`, :func:`make_agent`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import struct

from jaxrl import perf as perf_lib
from jaxrl.algos.onpolicy import StepResult, run_epochs, scan_method, scheduled_lr, values_and_next
from jaxrl.algos.presets import load_presets
from jaxrl.algos.qvalue import LossMetrics, make_q_network, q_loss, validate_q_network
from jaxrl.core.checks import POSITIVE, POSITIVE_INT, UNIT, check_rollout, divisor_near, require_one_of
from jaxrl.core.config import Config
from jaxrl.core.contract import Agent, Algorithm, Behaviour, LoopMetrics, own_metrics
from jaxrl.core.errors import ConfigError
from jaxrl.core.fields import HParams, setting, traced
from jaxrl.envs.core import Env
from jaxrl.nets.networks import QNetwork
from jaxrl.nets.networks import init as init_network
from jaxrl.rl import optim
from jaxrl.rl.qlearning import epsilon_greedy, linear_epsilon, q_lambda

__all__ = [
    "PQNConfig",
    "HParams",
    "PQNState",
    "Transition",
    "Rollout",
    "LossMetrics",
    "UpdateMetrics",
    "rollout",
    "targets",
    "make_agent",
    "ALGORITHM",
]


@dataclass(frozen=True)
class PQNConfig:
    """Parallelised Q-Network (Gallici et al., 2024, arXiv:2407.04811): ε-greedy
    vectorized rollouts, Q(λ) targets, LayerNorm Q-network, no buffer, no target network."""

    name: str = "pqn"
    # --- static ---------------------------------------------------------------
    num_steps: int = 64  # rollout length T per env per update
    update_epochs: int = setting(4, check=POSITIVE_INT)
    num_minibatches: int = setting(16, check=POSITIVE_INT)
    network: str = "auto"  # torso by name: auto (mlp; cnn for image obs) | mlp | cnn | registered
    hidden_sizes: tuple[int, ...] = (128, 128)
    activation: str = "relu"
    norm: str = "layer_norm"  # layer_norm | none: before every activation of the torso
    conv_channels: tuple[int, ...] = (16,)
    conv_kernels: tuple[int, ...] = (3,)
    conv_strides: tuple[int, ...] = (1,)
    dueling: bool = False  # Q = V + A − mean A
    loss: str = "mse"  # mse (½ (Q − G)²) | huber
    lr_schedule: str = "linear"  # constant | linear (anneal to 0)
    q_lambda_method: str = "auto"  # auto | associative | scan (the Q(λ) recurrence)
    # --- traced ---------------------------------------------------------------
    lr: float = traced(3e-4, check=POSITIVE, pbt=(1e-5, 1e-1, True))
    gamma: float = traced(0.99, check=UNIT, pbt=(0.9, 0.9999, False))
    q_lambda: float = traced(
        0.65, check=UNIT, pbt=(0.0, 1.0, False)
    )  # λ of Peng's Q(λ); 0: one-step Q-learning targets
    eps_start: float = traced(1.0, check=UNIT)
    eps_end: float = traced(0.05, check=UNIT)
    exploration_fraction: float = traced(0.2, check=UNIT)  # of the budget over which ε decays linearly
    max_grad_norm: float = traced(10.0, check=POSITIVE, pbt=(0.05, 10.0, True))
    reward_scale: float = traced(1.0, pbt=(0.01, 100.0, True))


class Rollout(NamedTuple):
    """What PQN learns from: ``T`` ε-greedy steps of ``N`` envs and the
    observation after the last step (the bootstrap of the final Q(λ) target)."""

    steps: Transition  # [T, N, ...]
    last_obs: jax.Array  # [N, *obs]


@struct.dataclass
class PQNState:
    """Everything one member carries between updates."""

    params: Any
    opt_state: Any
    env_state: Any  # [N]
    obs: jax.Array  # [N, *obs]
    key: jax.Array
    epsilon: jax.Array  # float32 [] the exploration rate of the last rollout (``sample`` uses it)


class Transition(NamedTuple):
    """One rollout step of every env (leaves ``[N, ...]``; a rollout ``[T, N, ...]``)."""

    obs: jax.Array
    action: jax.Array  # int32
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    final_obs: jax.Array  # pre-reset next observation
    episode_return: jax.Array
    episode_length: jax.Array


class UpdateMetrics(NamedTuple):
    """Per-update metrics of one member (scalars)."""

    loop: LoopMetrics  # episodes completed in the update, and whether it was finite
    loss: jax.Array
    q: jax.Array
    target: jax.Array  # mean Q(λ) target of the rollout
    epsilon: jax.Array
    grad_norm: jax.Array
    lr: jax.Array


def rollout(
    state: PQNState, epsilon: jax.Array, env: Env, env_params: Any, network: QNetwork, steps: int
) -> tuple[PQNState, Transition]:
    """``steps`` ε-greedy steps of the ``N`` envs; the coins, random actions and
    env randomness of all steps are drawn up front (one call each)."""
    num_envs = state.obs.shape[0]
    step_env = jax.vmap(env.step_drawn, in_axes=(0, 0, 0, None))
    key, key_coin, key_action, key_env = jax.random.split(state.key, 4)
    coins = jax.random.uniform(key_coin, (steps, num_envs))
    randoms = jax.random.randint(key_action, (steps, num_envs), 0, env.action_space.n)
    env_draws = env.draw_steps(jax.random.split(key_env, (steps, num_envs)), env_params)

    def step(carry, inputs):
        env_state, obs = carry
        coin, random_action, draws = inputs
        action = epsilon_greedy(network.apply(state.params, obs), epsilon, coin, random_action)
        env_state, out = step_env(draws, env_state, action, env_params)
        transition = Transition(
            obs,
            action,
            out.reward,
            out.terminated,
            out.truncated,
            out.final_obs,
            out.episode_return,
            out.episode_length,
        )
        return (env_state, out.obs), transition

    (env_state, obs), traj = perf_lib.scan(network.perf)(
        step, (state.env_state, state.obs), (coins, randoms, env_draws)
    )
    return state.replace(env_state=env_state, obs=obs, key=key, epsilon=jnp.asarray(epsilon, jnp.float32)), traj


def targets(
    params: Any, batch: Rollout, hp: Any, env: Env, env_params: Any, network: QNetwork, algo: PQNConfig
) -> jax.Array:
    """Q(λ) targets ``[T, N]`` of a rollout under ``params``: ``max_a Q`` of every
    observation, of the final observations and of the observation after the last
    step in one batched pass (:func:`jaxrl.algos.onpolicy.values_and_next`), then
    :func:`jaxrl.rl.q_lambda`."""
    traj = batch.steps

    def q_max(x: jax.Array) -> jax.Array:
        return jnp.max(network.apply(params, x), axis=-1)

    value, next_value = values_and_next(
        q_max, traj.obs, traj.final_obs, traj.truncated, batch.last_obs, env.truncation_period(env_params)
    )
    done = jnp.logical_or(traj.terminated, traj.truncated)
    method = scan_method(algo.q_lambda_method)
    return q_lambda(
        traj.reward * hp.reward_scale, value, next_value, traj.terminated, done, hp.gamma, hp.q_lambda, method=method
    )


def make_agent(
    algo: PQNConfig,
    env: Env,
    num_envs: int,
    num_updates: int,
    env_params: Any = None,
    *,
    network: nn.Module | None = None,
    optimizer: optim.Spec = None,
    perf: bool = False,
) -> Agent:
    """PQN for ``num_envs`` copies of a discrete-action ``env``. ``network``: a flax
    torso under the Q head instead of ``algo.network``'s; ``optimizer``: as PPO's
    (:mod:`jaxrl.rl.optim`); ``perf``: :mod:`jaxrl.perf`'s switch, resolved."""
    q_network = make_q_network(algo, env, network, perf)
    optimizer = optim.make(optimizer)
    env_params = env.default_params if env_params is None else env_params
    steps_per_update = num_envs * algo.num_steps
    total_steps = num_updates * steps_per_update
    n_mb = algo.num_minibatches
    size = steps_per_update

    def epsilon_at(hp: HParams, update_idx: jax.Array) -> jax.Array:
        step = update_idx.astype(jnp.float32) * steps_per_update
        return linear_epsilon(step, hp.eps_start, hp.eps_end, hp.exploration_fraction, total_steps)

    def init(key: jax.Array, hp: HParams) -> PQNState:
        key_params, key_env, key = jax.random.split(key, 3)
        dummy = jnp.zeros((1,) + env.obs_shape, jnp.float32)
        params = init_network(q_network, key_params, dummy, perf=perf)
        env_state, obs = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(key_env, num_envs), env_params)
        return PQNState(params, optimizer.init(params), env_state, obs, key, jnp.asarray(hp.eps_start, jnp.float32))

    def collect(state: PQNState, hp: HParams, update_idx: jax.Array) -> tuple[PQNState, Rollout]:
        """``num_steps`` ε-greedy steps at the exploration rate of this update."""
        state, traj = rollout(state, epsilon_at(hp, update_idx), env, env_params, q_network, algo.num_steps)
        return state, Rollout(traj, state.obs)

    def learn(state: PQNState, batch: Rollout, hp: HParams, update_idx: jax.Array) -> tuple[PQNState, UpdateMetrics]:
        """Q(λ) targets under the current parameters, then the epochs of minibatch steps."""
        traj = batch.steps
        target = targets(state.params, batch, hp, env, env_params, q_network, algo)
        flat = jax.tree.map(lambda x: x.reshape((size,) + x.shape[2:]), (traj.obs, traj.action, target))
        lr = scheduled_lr(algo.lr_schedule, hp.lr, update_idx, num_updates)
        key, key_learn = jax.random.split(state.key)

        def minibatches(key_perm: jax.Array) -> jax.Array:
            return perf_lib.permutation(perf, key_perm, size).reshape(n_mb, size // n_mb)

        def step(params, opt_state, lr, rows):
            obs, action, y = jax.tree.map(lambda x: jnp.take(x, rows, axis=0), flat)
            (_, metrics), grads = jax.value_and_grad(q_loss, has_aux=True)(params, q_network, obs, action, y, algo.loss)
            params, opt_state, grad_norm = optim.apply(
                params, grads, opt_state, lr, hp.max_grad_norm, optimizer=optimizer
            )
            return StepResult(params, opt_state, lr, metrics, grad_norm)

        out = run_epochs(state.params, state.opt_state, lr, key_learn, algo, minibatches, step, LossMetrics)
        rollout_epsilon = state.epsilon
        # the next rollout's exploration rate: actors outside the program (``behave``) read it
        # from the parameters' state; the compiled ``collect`` sets the same value itself
        state = state.replace(
            params=out.params, opt_state=out.opt_state, key=key, epsilon=epsilon_at(hp, update_idx + 1)
        )
        done = jnp.logical_or(traj.terminated, traj.truncated)
        finite = jnp.isfinite(out.metrics.loss) & jnp.isfinite(out.grad_norm) & optim.tree_all_finite(out.params)
        metrics = UpdateMetrics(
            loop=LoopMetrics.of(done, traj.episode_return, traj.episode_length, finite),
            loss=out.metrics.loss,
            q=out.metrics.q,
            target=jnp.mean(target),
            epsilon=rollout_epsilon,
            grad_norm=out.grad_norm,
            lr=jnp.asarray(lr, jnp.float32),
        )
        return state, metrics

    def act(state: PQNState, obs: jax.Array, key: jax.Array) -> jax.Array:
        del key  # greedy
        return jnp.argmax(q_network.apply(state.params, obs), axis=-1).astype(jnp.int32)

    def sample(state: PQNState, obs: jax.Array, key: jax.Array) -> jax.Array:
        """ε-greedy at the state's exploration rate (that of the next rollout)."""
        key_coin, key_action = jax.random.split(key)
        batch = obs.shape[: obs.ndim - len(env.obs_shape)]
        coin = jax.random.uniform(key_coin, batch)
        random_action = jax.random.randint(key_action, batch, 0, env.action_space.n)
        return epsilon_greedy(q_network.apply(state.params, obs), state.epsilon, coin, random_action)

    def rollout_phase(state: PQNState, hp: HParams) -> tuple[PQNState, Transition]:
        return rollout(state, hp.eps_end, env, env_params, q_network, algo.num_steps)

    def targets_phase(state: PQNState, hp: HParams) -> jax.Array:
        state, traj = rollout_phase(state, hp)
        return targets(state.params, Rollout(traj, state.obs), hp, env, env_params, q_network, algo)

    def behave(state: PQNState, obs: jax.Array, key: jax.Array) -> tuple[jax.Array, Behaviour]:
        """An actor's ε-greedy step outside the program (:mod:`jaxrl.actors`)."""
        action = sample(state, obs, key)
        return action, Behaviour(action, jnp.zeros(action.shape, jnp.float32))

    def complete(state: PQNState, steps: Any) -> Rollout:
        """The actors' steps ``[T, N, ...]`` (by field name) as ``learn``'s rollout: every
        step's ``final_obs`` is its next observation before any reset, so the targets
        bootstrap from it (``last_obs``, the last step's, matters only where it is)."""
        steps = dict(steps)
        traj = Transition(**{name: steps[name] for name in Transition._fields})
        return Rollout(traj, traj.final_obs[-1])

    phases = (
        ("rollout: env step + Q forward + ε-greedy", rollout_phase),
        ("targets: max Q of the observations and final observations, Q(λ)", targets_phase),
    )
    return Agent(
        init,
        collect,
        learn,
        act,
        sample,
        q_network,
        steps_per_update,
        phases=phases,
        behave=behave,
        complete=complete,
    )


# ---------------------------------------------------------------------------
# Declarations for the registry (jaxrl.algos)
# ---------------------------------------------------------------------------


def validate(config: Config) -> None:
    """PQN's checks beyond each field's own."""
    algo = config.algo
    batch = check_rollout(config, 64)
    if batch % algo.num_minibatches:
        raise ConfigError(
            "algo.num_minibatches",
            algo.num_minibatches,
            f"must divide the batch num_envs × algo.num_steps = {config.num_envs} × {algo.num_steps} = {batch}",
            f"pass a divisor of {batch}, e.g. algo.num_minibatches={divisor_near(batch, algo.num_minibatches)}",
        )
    validate_q_network(algo)
    require_one_of("algo.lr_schedule", algo.lr_schedule, ("constant", "linear"), "linear")
    require_one_of("algo.q_lambda_method", algo.q_lambda_method, ("auto", "associative", "scan"), "auto")


ALGORITHM = Algorithm(
    name="pqn",
    config=PQNConfig,
    make_agent=make_agent,
    seams=("network", "optimizer", "perf"),
    metrics=own_metrics(UpdateMetrics),
    description="Parallelised Q-Network: ε-greedy vectorized rollouts, Q(λ) targets, LayerNorm, no buffer or target network",
    actions=("discrete",),
    data_parallel=True,
    presets=load_presets("pqn"),
    validate=validate,
)
