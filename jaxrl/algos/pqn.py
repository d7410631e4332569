"""Parallelised Q-Network (PQN; Gallici et al., 2024, "Simplifying Deep Temporal
Difference Learning", arXiv:2407.04811).

Q-learning without a replay buffer or a target network: ``N`` vectorized envs act
ε-greedily for ``T`` steps, Peng's Q(λ) targets are computed over the rollout
(:func:`jaxrl.rl.q_lambda`: the GAE recurrence with ``V = max_a Q``, the
truncation bootstrap from the pre-reset final observation), and the Q-network —
LayerNorm before every activation, which is what keeps it stable without a
target network — regresses them for ``update_epochs × num_minibatches`` steps,
as PPO's learner does (:func:`jaxrl.algos.ppo.run_epochs`).

Pure pieces: :func:`q_loss` (on a minibatch), :func:`rollout`, :func:`targets`,
:func:`make_agent`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import struct

from jaxrl import perf as perf_lib
from jaxrl.algos import ppo
from jaxrl.core.checks import (
    check_positive,
    check_rollout,
    divisor_near,
    require_one_of,
    require_positive_int,
    require_unit_interval,
)
from jaxrl.core.config import PBT_BOUNDS, Config
from jaxrl.core.contract import Agent, Algorithm, own_metrics
from jaxrl.core.errors import ConfigError
from jaxrl.envs.core import Discrete, Env
from jaxrl.nets.networks import QNetwork, make_torso
from jaxrl.nets.networks import init as init_network
from jaxrl.rl import optim
from jaxrl.rl.qlearning import epsilon_greedy, linear_epsilon, q_lambda

__all__ = [
    "PQNConfig",
    "HParams",
    "PQNState",
    "Transition",
    "LossMetrics",
    "UpdateMetrics",
    "make_q_network",
    "td_loss",
    "q_loss",
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
    update_epochs: int = 4
    num_minibatches: int = 16
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
    lr: float = 3e-4
    gamma: float = 0.99
    q_lambda: float = 0.65  # λ of Peng's Q(λ); 0: one-step Q-learning targets
    eps_start: float = 1.0
    eps_end: float = 0.05
    exploration_fraction: float = 0.2  # of the budget over which ε decays linearly
    max_grad_norm: float = 10.0
    reward_scale: float = 1.0

    TRACED: ClassVar[tuple[str, ...]] = (
        "lr",
        "gamma",
        "q_lambda",
        "eps_start",
        "eps_end",
        "exploration_fraction",
        "max_grad_norm",
        "reward_scale",
    )


@struct.dataclass
class HParams:
    """Traced PQN hyperparameters (float32 scalars; add a leading axis to vmap)."""

    lr: jax.Array
    gamma: jax.Array
    q_lambda: jax.Array
    eps_start: jax.Array
    eps_end: jax.Array
    exploration_fraction: jax.Array
    max_grad_norm: jax.Array
    reward_scale: jax.Array

    @classmethod
    def from_config(cls, algo: PQNConfig) -> HParams:
        return cls(**{k: jnp.asarray(getattr(algo, k), jnp.float32) for k in PQNConfig.TRACED})


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


class LossMetrics(NamedTuple):
    loss: jax.Array
    q: jax.Array  # mean Q(s, a) of the minibatch


class UpdateMetrics(NamedTuple):
    """Per-update metrics of one member (scalars)."""

    episode_return_sum: jax.Array
    episode_length_sum: jax.Array
    episodes: jax.Array
    finite: jax.Array
    loss: jax.Array
    q: jax.Array
    target: jax.Array  # mean Q(λ) target of the rollout
    epsilon: jax.Array
    grad_norm: jax.Array
    lr: jax.Array


def make_q_network(algo: Any, env: Env, torso: nn.Module | None = None, perf: bool = True) -> QNetwork:
    """The Q-network for ``env``'s discrete actions: ``torso`` (default: the
    registered ``algo.network``, with ``algo.norm``) under a linear or dueling head."""
    if not isinstance(env.action_space, Discrete):
        raise TypeError(f"algo={algo.name} needs discrete actions; {env.name} has {env.action_space}")
    if torso is None:
        torso = make_torso(algo.network, algo, env.obs_shape)
    return QNetwork(env.action_space.n, torso, algo.dueling, perf)


def td_loss(q: jax.Array, target: jax.Array, kind: str = "mse") -> jax.Array:
    """Mean regression loss of ``q`` ``[B]`` to ``target`` ``[B]`` (no gradient into
    the target): ``½ (q − y)²`` (``"mse"``) or Huber with δ = 1 (``"huber"``)."""
    error = q - jax.lax.stop_gradient(target)
    if kind == "huber":
        absolute = jnp.abs(error)
        return jnp.mean(jnp.where(absolute <= 1.0, 0.5 * jnp.square(error), absolute - 0.5))
    return jnp.mean(0.5 * jnp.square(error))


def q_loss(
    params: Any, network: QNetwork, obs: jax.Array, action: jax.Array, target: jax.Array, kind: str = "mse"
) -> tuple[jax.Array, LossMetrics]:
    """PQN's loss on a minibatch: :func:`td_loss` of ``Q(s, a)`` (obs ``[B, *obs]``,
    int actions ``[B]``) to the Q(λ) targets ``[B]``."""
    q = jnp.take_along_axis(network.apply(params, obs), action[:, None].astype(jnp.int32), axis=-1)[:, 0]
    loss = td_loss(q, target, kind)
    return loss, LossMetrics(loss, jnp.mean(q))


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
    state: PQNState, traj: Transition, hp: HParams, env: Env, env_params: Any, network: QNetwork, algo: PQNConfig
) -> jax.Array:
    """Q(λ) targets ``[T, N]`` of a rollout under the parameters that collected it:
    ``max_a Q`` of every observation and of the final observations in one batched
    pass (:func:`jaxrl.algos.ppo.values_and_next`), then :func:`jaxrl.rl.q_lambda`."""

    def q_max(x: jax.Array) -> jax.Array:
        return jnp.max(network.apply(state.params, x), axis=-1)

    value, next_value = ppo.values_and_next(
        q_max, traj.obs, traj.final_obs, traj.truncated, state.obs, env.truncation_period(env_params)
    )
    done = jnp.logical_or(traj.terminated, traj.truncated)
    method = algo.q_lambda_method
    if method == "auto":
        method = "scan" if jax.default_backend() == "cpu" else "associative"
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
    perf: bool = True,
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

    def update(state: PQNState, hp: HParams, update_idx: jax.Array) -> tuple[PQNState, UpdateMetrics]:
        epsilon = epsilon_at(hp, update_idx)
        state, traj = rollout(state, epsilon, env, env_params, q_network, algo.num_steps)
        target = targets(state, traj, hp, env, env_params, q_network, algo)
        flat = jax.tree.map(lambda x: x.reshape((size,) + x.shape[2:]), (traj.obs, traj.action, target))
        if algo.lr_schedule == "linear":
            lr = hp.lr * (1.0 - update_idx.astype(jnp.float32) / num_updates)
        else:
            lr = hp.lr
        key, key_learn = jax.random.split(state.key)

        def minibatches(key_perm: jax.Array) -> jax.Array:
            return perf_lib.permutation(perf, key_perm, size).reshape(n_mb, size // n_mb)

        def step(params, opt_state, lr, rows):
            obs, action, y = jax.tree.map(lambda x: jnp.take(x, rows, axis=0), flat)
            (_, metrics), grads = jax.value_and_grad(q_loss, has_aux=True)(params, q_network, obs, action, y, algo.loss)
            params, opt_state, grad_norm = optim.apply(
                params, grads, opt_state, lr, hp.max_grad_norm, optimizer=optimizer
            )
            return ppo.StepResult(params, opt_state, lr, metrics, grad_norm)

        out = ppo.run_epochs(state.params, state.opt_state, lr, key_learn, algo, minibatches, step, LossMetrics)
        state = state.replace(params=out.params, opt_state=out.opt_state, key=key)
        done = jnp.logical_or(traj.terminated, traj.truncated)
        done_f = done.astype(jnp.float32)
        metrics = UpdateMetrics(
            episode_return_sum=jnp.sum(traj.episode_return * done_f),
            episode_length_sum=jnp.sum(traj.episode_length * done_f),
            episodes=jnp.sum(done.astype(jnp.int32)),
            finite=jnp.isfinite(out.metrics.loss) & jnp.isfinite(out.grad_norm) & optim.tree_all_finite(out.params),
            loss=out.metrics.loss,
            q=out.metrics.q,
            target=jnp.mean(target),
            epsilon=epsilon,
            grad_norm=out.grad_norm,
            lr=jnp.asarray(lr, jnp.float32),
        )
        return state, metrics

    def act(state: PQNState, obs: jax.Array, key: jax.Array) -> jax.Array:
        del key  # greedy
        return jnp.argmax(q_network.apply(state.params, obs), axis=-1).astype(jnp.int32)

    def sample(state: PQNState, obs: jax.Array, key: jax.Array) -> jax.Array:
        """ε-greedy at the exploration rate of the last rollout."""
        key_coin, key_action = jax.random.split(key)
        batch = obs.shape[: obs.ndim - len(env.obs_shape)]
        coin = jax.random.uniform(key_coin, batch)
        random_action = jax.random.randint(key_action, batch, 0, env.action_space.n)
        return epsilon_greedy(q_network.apply(state.params, obs), state.epsilon, coin, random_action)

    phases = (
        (
            "rollout: env step + Q forward + ε-greedy",
            lambda state, hp: rollout(state, hp.eps_end, env, env_params, q_network, algo.num_steps),
        ),
        (
            "targets: max Q of the observations and final observations, Q(λ)",
            lambda state, hp: targets(
                *rollout(state, hp.eps_end, env, env_params, q_network, algo.num_steps),
                hp,
                env,
                env_params,
                q_network,
                algo,
            ),
        ),
    )
    return Agent(init, update, act, sample, q_network, steps_per_update, phases=phases)


# ---------------------------------------------------------------------------
# Declarations for the registry (jaxrl.algos)
# ---------------------------------------------------------------------------

# MinAtar (10×10×C grids): purejaxql's PQN settings (128 envs × 32 steps, 2 epochs
# × 32 minibatches, lr 5e-4, λ 0.65, ε 1 → 0.05 over the first 10 %, 10M steps)
# with its network: conv 16 × 3², dense 128, LayerNorm before each ReLU.
MINATAR: dict[str, Any] = {
    "num_envs": 128,
    "total_timesteps": 10_000_000,
    "algo.num_steps": 32,
    "algo.update_epochs": 2,
    "algo.num_minibatches": 32,
    "algo.lr": 5e-4,
    "algo.q_lambda": 0.65,
    "algo.exploration_fraction": 0.1,
    "algo.hidden_sizes": [128],
}

PRESETS: dict[str, dict[str, Any]] = {
    **{f"{game}-MinAtar": dict(MINATAR) for game in ("Breakout", "Asterix", "Freeway", "SpaceInvaders", "Seaquest")},
    # PQN on CartPole: 16 / 16 seeds solved at 262k env steps per seed in a
    # 2 × 2 sweep (lr 3e-4/1e-3 × λ 0.65/0.9; docs).
    "CartPole-v1": {
        "num_envs": 32,
        "total_timesteps": 262_144,
        "algo.lr": 1e-3,
        "algo.q_lambda": 0.9,
    },
    # PQN on Acrobot: −82 IQM, 4 / 4 seeds above −100 at 262k env steps per seed
    # (λ 0.65: 3 / 4; docs).
    # PQN on MountainCar: every seed of 8 reaches the flag at 2.1M env steps per
    # seed (final −99 to −118, IQM −106; exploration over 50 %: one seed at −200;
    # docs). 128 envs explore what 32 do not.
    "MountainCar-v0": {
        "num_envs": 128,
        "total_timesteps": 2_097_152,
        "algo.num_steps": 32,
        "algo.lr": 1e-3,
        "algo.q_lambda": 0.95,
    },
    "Acrobot-v1": {
        "num_envs": 32,
        "total_timesteps": 262_144,
        "algo.lr": 1e-3,
        "algo.q_lambda": 0.9,
    },
}


def validate_q_network(algo: Any) -> None:
    """The Q-network settings PQN and DQN share."""
    ppo.validate_torso(algo)
    require_one_of("algo.loss", algo.loss, ("mse", "huber"), "mse")
    for name in ("eps_start", "eps_end", "exploration_fraction"):
        require_unit_interval(f"algo.{name}", getattr(algo, name), getattr(type(algo), name))
    require_unit_interval("algo.gamma", algo.gamma, 0.99)
    check_positive(algo, "lr", "max_grad_norm")


def validate(config: Config) -> None:
    """PQN's checks beyond the common ones."""
    algo = config.algo
    batch = check_rollout(config, 64)
    require_positive_int("algo.update_epochs", algo.update_epochs, 4)
    require_positive_int("algo.num_minibatches", algo.num_minibatches, 16)
    if batch % algo.num_minibatches:
        raise ConfigError(
            "algo.num_minibatches",
            algo.num_minibatches,
            f"must divide the batch num_envs × algo.num_steps = {config.num_envs} × {algo.num_steps} = {batch}",
            f"pass a divisor of {batch}, e.g. algo.num_minibatches={divisor_near(batch, algo.num_minibatches)}",
        )
    validate_q_network(algo)
    require_unit_interval("algo.q_lambda", algo.q_lambda, 0.65)
    require_one_of("algo.lr_schedule", algo.lr_schedule, ("constant", "linear"), "linear")
    require_one_of("algo.q_lambda_method", algo.q_lambda_method, ("auto", "associative", "scan"), "auto")


ALGORITHM = Algorithm(
    name="pqn",
    config=PQNConfig,
    hparams=HParams,
    make_agent=make_agent,
    seams=("network", "optimizer", "perf"),
    metrics=own_metrics(UpdateMetrics),
    description="Parallelised Q-Network: ε-greedy vectorized rollouts, Q(λ) targets, LayerNorm, no buffer or target network",
    actions=("discrete",),
    data_parallel=True,
    presets=PRESETS,
    validate=validate,
    pbt_bounds={k: PBT_BOUNDS[k] for k in ("lr", "gamma", "q_lambda", "max_grad_norm", "reward_scale")},
)
