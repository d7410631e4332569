"""The actor-critic pieces the policy-gradient learners share (PPO, A2C,
REINFORCE): the member's state, the actor-critic network and its action
distributions, the rollout that records behaviour log-probs and values at
collection time (feed-forward and recurrent), the reward / value normalizers
with GAE that turn a rollout into learner input, and the deterministic and
sampled policies.

A learner's input is a :class:`Rollout`: ``T`` steps of ``N`` envs
(:class:`Transition` ``[T, N, ...]``) and, for a recurrent policy, the carry at
its first step — whoever collected it (the in-program :func:`rollout`, or a
host-side actor).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import struct

from jaxrl import perf as perf_lib
from jaxrl.algos.onpolicy import scan_method, validate_torso, values_and_next
from jaxrl.core.checks import require_one_of
from jaxrl.core.contract import Behaviour
from jaxrl.envs.core import Discrete, Env
from jaxrl.nets.networks import ActorCritic, make_torso
from jaxrl.nets.networks import init as init_network
from jaxrl.nets.recurrent import RecurrentActorCritic, reset_carry
from jaxrl.rl import normalize, optim
from jaxrl.rl.advantages import gae
from jaxrl.rl.distributions import Categorical, DiagGaussian, TanhGaussian

__all__ = [
    "ADAM_EPS",
    "Parts",
    "make_parts",
    "ActorCriticState",
    "Transition",
    "Rollout",
    "Batch",
    "SequenceBatch",
    "Prepared",
    "make_network",
    "distribution",
    "sample_action",
    "action_noise",
    "sample_from_noise",
    "log_prob",
    "mode_action",
    "policy_and_value",
    "prepare_obs",
    "env_action",
    "value_of",
    "step_transition",
    "rollout",
    "rollout_recurrent",
    "collect",
    "advantages",
    "init_state",
    "make_policy",
    "Behaviour",
    "make_behaviour",
    "acting",
    "validate_network",
]

ADAM_EPS = 1e-5


class Transition(NamedTuple):
    """One rollout step for ``N`` envs (stacked to ``[T, N, ...]`` by the scan)."""

    obs: jax.Array  # [N, *obs] raw observation s_t
    action: jax.Array  # [N] int32 or [N, d] float32: the stored action (pre-tanh u / unclipped sample)
    log_prob: jax.Array  # [N] behaviour log π(a|s) at collection time
    value: jax.Array  # [N] V(s) at collection time
    next_value: jax.Array  # [N] V(final_obs): of the pre-reset s_{t+1} (relevant where not terminated)
    reward: jax.Array  # [N]
    terminated: jax.Array  # [N] bool
    truncated: jax.Array  # [N] bool
    final_obs: jax.Array  # [N, *obs] raw pre-reset s_{t+1}
    episode_return: jax.Array  # [N] return of an episode ending here (valid where done)
    episode_length: jax.Array  # [N]


class Batch(NamedTuple):
    """Learner input, flattened to ``[B, ...]``."""

    obs: jax.Array  # [B, *obs]
    action: jax.Array  # [B] or [B, d]
    log_prob: jax.Array  # [B] behaviour log-prob
    value: jax.Array  # [B] value at collection
    advantage: jax.Array  # [B] GAE
    target: jax.Array  # [B] value target = advantage + value


class SequenceBatch(NamedTuple):
    """Learner input of a recurrent policy: whole env sequences ``[T, M, ...]``
    with the carry at their first step and where the carry restarts."""

    batch: Batch  # every field [T, M, ...]
    carry: jax.Array  # [M, C] the carry before step 0 (already reset where an episode began there)
    reset: jax.Array  # [T, M] bool: an episode begins at step t (t ≥ 1): the carry restarts from zeros


@struct.dataclass
class ActorCriticState:
    """Everything one member of an actor-critic learner carries between updates."""

    params: Any  # flax params pytree
    opt_state: Any  # the optimizer's optax state (default: Adam moments over the raveled params, jaxrl.rl.optim)
    lr: jax.Array  # float32 [] current lr (moves under lr_schedule=adaptive)
    obs_stats: normalize.RunningStats  # observation normalizer (identity if disabled)
    return_stats: normalize.RunningStats  # [] running stats of the discounted return (normalize_reward)
    discounted_return: jax.Array  # [N] running discounted return per env, reset at episode ends
    value_stats: normalize.RunningStats  # [] running stats of the value targets (normalize_value)
    env_state: Any  # EnvState batched [N]
    obs: jax.Array  # [N, *obs] raw current observations
    key: jax.Array  # PRNG key of this seed's training stream
    carry: Any = None  # [N, C] recurrent policies: the carry for the current observations (None otherwise)


def make_network(algo: Any, env: Env, torso: nn.Module | None = None, perf: bool = False) -> Any:
    """The actor-critic for ``env``: ``torso`` (default: the registered
    ``algo.network``) under a policy and a value head; ``perf``: jaxrl.perf.
    A recurrent torso (``torso.recurrent``, :mod:`jaxrl.nets.recurrent`) gives a
    :class:`~jaxrl.nets.recurrent.RecurrentActorCritic`."""
    space = env.action_space
    discrete = isinstance(space, Discrete)
    if torso is None:
        torso = make_torso(algo.network, algo, env.obs_shape)
    if getattr(torso, "recurrent", False):
        return RecurrentActorCritic(
            action_dim=space.n if discrete else int(space.shape[0]),
            discrete=discrete,
            core=torso,
            head_size=int(algo.hidden_sizes[-1]),
            activation=algo.activation,
            squash=algo.squash,
            log_std_init=algo.log_std_init,
            perf=perf,
        )
    return ActorCritic(
        action_dim=space.n if discrete else int(space.shape[0]),
        discrete=discrete,
        obs_ndim=len(env.obs_shape),
        hidden_sizes=tuple(algo.hidden_sizes),
        activation=algo.activation,
        shared_torso=algo.shared_torso,
        squash=algo.squash,
        log_std_init=algo.log_std_init,
        torso=torso,
        perf=perf,
    )


def distribution(network: ActorCritic, params: Any, policy_out: jax.Array):
    """The policy from the policy head: Categorical(logits); for continuous
    actions a TanhGaussian over ``[-1, 1]`` (``squash="tanh"``) or a
    DiagGaussian whose samples are clipped to the bounds (``squash="clip"``).

    Stored actions (and their log-probs) live in the distribution's own space:
    the pre-tanh sample ``u`` for TanhGaussian, so PPO's ratios need no
    inverse tanh; :func:`env_action` maps them to what the env receives."""
    if network.discrete:
        return Categorical(policy_out)
    log_std = jnp.broadcast_to(network.apply(params, method="log_std"), policy_out.shape)
    if network.squash == "tanh":
        ones = jnp.ones(policy_out.shape[-1:])
        return TanhGaussian(policy_out, log_std, -ones, ones)
    return DiagGaussian(policy_out, log_std)


def sample_action(dist: Any, key: jax.Array) -> jax.Array:
    """A stored action (pre-tanh ``u`` for TanhGaussian)."""
    return dist.sample_pre_tanh(key) if isinstance(dist, TanhGaussian) else dist.sample(key)


def action_noise(network: ActorCritic, key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """The randomness of ``shape`` action samples, drawn in one call: Gumbel
    ``[*shape, n]`` (discrete) or standard normal ``[*shape, d]`` (continuous);
    :func:`sample_from_noise` turns it into actions."""
    if network.discrete:
        return jax.random.gumbel(key, (*shape, network.action_dim), jnp.float32)
    return jax.random.normal(key, (*shape, network.action_dim), jnp.float32)


def sample_from_noise(dist: Any, noise: jax.Array) -> jax.Array:
    """A stored action from :func:`action_noise`: ``argmax(logits + g)`` (the
    Gumbel-max trick) or ``mean + exp(log_std) · ε`` (pre-tanh for TanhGaussian)."""
    if isinstance(dist, Categorical):
        return jnp.argmax(dist.logits + noise, axis=-1).astype(jnp.int32)
    return dist.mean + jnp.exp(dist.log_std) * noise


def log_prob(dist: Any, action: jax.Array) -> jax.Array:
    """``log π`` of a stored action (for TanhGaussian including the tanh log-det)."""
    return dist.log_prob_pre_tanh(action) if isinstance(dist, TanhGaussian) else dist.log_prob(action)


def mode_action(dist: Any) -> jax.Array:
    """The deterministic stored action: argmax or the (pre-tanh) mean."""
    return dist.mean if isinstance(dist, (TanhGaussian, DiagGaussian)) else dist.mode()


def policy_and_value(network: Any, params: Any, batch: Any) -> tuple[Any, jax.Array, Any]:
    """``(π(·|s), V(s), flat batch)`` of the network on a batch's observations:
    one forward pass over ``batch.obs`` ``[B, *obs]``, or for a
    :class:`SequenceBatch` the recurrent torso's pass over whole sequences from
    their start carry (``flat batch``: the sequences' inner :class:`Batch`)."""
    if isinstance(batch, SequenceBatch):
        _, features = network.apply(params, batch.carry, batch.batch.obs, batch.reset, method="sequence")
        policy_out = network.apply(params, features, method="policy_from")
        value = network.apply(params, features, method="value_from")
        batch = batch.batch
    else:
        policy_out, value = network.apply(params, batch.obs)
    return distribution(network, params, policy_out), value, batch


def prepare_obs(state: ActorCriticState, obs: jax.Array, algo: Any) -> jax.Array:
    """The network's input: ``obs`` normalized by the member's running statistics under ``normalize_obs``."""
    if algo.normalize_obs:
        return normalize.normalize(state.obs_stats, obs)
    return obs


def env_action(action: jax.Array, network: ActorCritic, env: Env) -> jax.Array:
    """What the env receives for a stored action: itself (discrete), the tanh
    of ``u`` scaled to the bounds (``squash="tanh"``) or the sample clipped to
    the bounds (``squash="clip"``)."""
    if isinstance(env.action_space, Discrete):
        return action
    low, high = jnp.asarray(env.action_space.low), jnp.asarray(env.action_space.high)
    if network.squash == "tanh":
        return low + (jnp.tanh(action) + 1.0) * 0.5 * (high - low)
    return jnp.clip(action, low, high)


def value_of(state: ActorCriticState, raw: jax.Array, algo: Any) -> jax.Array:
    """Critic output → value in return units (de-normalized under normalize_value;
    algorithms without that setting never normalize)."""
    if getattr(algo, "normalize_value", False):
        return raw * jnp.sqrt(state.value_stats.var + 1e-8) + state.value_stats.mean
    return raw


def step_transition(obs: jax.Array, action: jax.Array, out: Any) -> Transition:
    """A rollout step's :class:`Transition` from the env's step output, the
    log-prob and values left empty (the rollouts fill them in batched)."""
    return Transition(
        obs=obs,
        action=action,
        log_prob=None,
        value=None,
        next_value=None,
        reward=out.reward,
        terminated=out.terminated,
        truncated=out.truncated,
        final_obs=out.final_obs,
        episode_return=out.episode_return,
        episode_length=out.episode_length,
    )


def rollout(
    state: ActorCriticState,
    env: Env,
    env_params: Any,
    network: ActorCritic,
    algo: Any,
) -> tuple[ActorCriticState, Transition]:
    """Collect ``algo.num_steps`` steps of the ``N`` envs in ``state``.

    Returns the advanced state and a :class:`Transition` of ``[T, N, ...]``.
    The action noise and the env randomness (:meth:`Env.draw_steps`) of all
    ``T`` steps are drawn up front in one call each, and the values ``V(s_t)``
    and ``V(final_obs_t)`` are computed after the loop in one batched pass, the
    log-probs of the sampled actions in another from the stacked policy
    outputs (same parameters and normalizer as while acting, so they are the
    values at collection time): the sequential loop does only the policy
    forward, the sampling and the env step, with its carry and outputs packed
    per dtype (:func:`jaxrl.perf.packing.scan`, under ``network.perf``).

    ``final_obs_t`` is ``s_{t+1}`` unless step ``t`` ended an episode, so
    when the env's truncation is a time limit of ``P`` steps
    (:meth:`Env.truncation_period`) the pass covers ``V(s_t)``, the at most
    ``⌈T / P⌉`` truncations per env and the last ``s_T`` — ``T + ⌈T / P⌉ + 1``
    rows per env instead of ``2T`` (:func:`next_values_from`).
    """
    if getattr(network, "recurrent", False):
        return rollout_recurrent(state, env, env_params, network, algo)
    steps, num_envs = algo.num_steps, state.obs.shape[0]
    step_env = jax.vmap(env.step_drawn, in_axes=(0, 0, 0, None))
    key, key_noise, key_env = jax.random.split(state.key, 3)
    noise = action_noise(network, key_noise, (steps, num_envs))
    env_draws = env.draw_steps(jax.random.split(key_env, (steps, num_envs)), env_params)

    def step(carry, inputs):
        env_state, obs = carry
        noise_t, draws_t = inputs
        policy_out = network.apply(state.params, prepare_obs(state, obs, algo), method=ActorCritic.policy)
        dist = distribution(network, state.params, policy_out)
        action = sample_from_noise(dist, noise_t)
        env_state, out = step_env(draws_t, env_state, env_action(action, network, env), env_params)
        transition = step_transition(obs, action, out)  # log-prob and values filled in below, batched
        return (env_state, out.obs), (transition, policy_out)

    (env_state, obs), (traj, policy_out) = perf_lib.scan(network.perf)(
        step, (state.env_state, state.obs), (noise, env_draws)
    )
    traj = traj._replace(log_prob=log_prob(distribution(network, state.params, policy_out), traj.action))

    def value_fn(x: jax.Array) -> jax.Array:
        raw = network.apply(state.params, prepare_obs(state, x, algo), method=ActorCritic.value)
        return value_of(state, raw, algo)

    value, next_value = values_and_next(
        value_fn, traj.obs, traj.final_obs, traj.truncated, obs, env.truncation_period(env_params)
    )
    traj = traj._replace(value=value, next_value=next_value)
    return state.replace(env_state=env_state, obs=obs, key=key), traj


def rollout_recurrent(
    state: ActorCriticState, env: Env, env_params: Any, network: Any, algo: Any
) -> tuple[ActorCriticState, Transition]:
    """:func:`rollout` for a recurrent policy. The carry goes through the loop
    with the envs and is zeroed after every step that ended an episode
    (terminated or truncated), so it never crosses an episode boundary. The
    loop keeps each step's features and its carry after ``s_t``; after it, one
    batched pass gives ``V(s_t)`` from the features and ``V(final_obs_t)`` by
    one more torso step from that carry on the pre-reset observation."""
    steps, num_envs = algo.num_steps, state.obs.shape[0]
    step_env = jax.vmap(env.step_drawn, in_axes=(0, 0, 0, None))
    key, key_noise, key_env = jax.random.split(state.key, 3)
    noise = action_noise(network, key_noise, (steps, num_envs))
    env_draws = env.draw_steps(jax.random.split(key_env, (steps, num_envs)), env_params)
    params = state.params

    def step(carry, inputs):
        env_state, obs, h = carry
        noise_t, draws_t = inputs
        h, features = network.apply(params, h, prepare_obs(state, obs, algo), None, method="step")
        policy_out = network.apply(params, features, method="policy_from")
        dist = distribution(network, params, policy_out)
        action = sample_from_noise(dist, noise_t)
        env_state, out = step_env(draws_t, env_state, env_action(action, network, env), env_params)
        transition = step_transition(obs, action, out)
        next_h = reset_carry(h, jnp.logical_or(out.terminated, out.truncated))
        return (env_state, out.obs, next_h), (transition, policy_out, features, h)

    (env_state, obs, carry), (traj, policy_out, features, hs) = jax.lax.scan(
        step, (state.env_state, state.obs, state.carry), (noise, env_draws)
    )
    traj = traj._replace(log_prob=log_prob(distribution(network, params, policy_out), traj.action))
    value = value_of(state, network.apply(params, features, method="value_from"), algo)
    _, next_features = network.apply(params, hs, prepare_obs(state, traj.final_obs, algo), None, method="step")
    next_value = value_of(state, network.apply(params, next_features, method="value_from"), algo)
    traj = traj._replace(value=value, next_value=next_value)
    return state.replace(env_state=env_state, obs=obs, key=key, carry=carry), traj


def init_state(
    key: jax.Array,
    hp: Any,
    env: Env,
    env_params: Any,
    network: ActorCritic,
    num_envs: int,
    optimizer: optim.Optimizer | None = None,
) -> ActorCriticState:
    """A member's first state: network parameters, optimizer and normalizer
    state, and ``num_envs`` freshly reset envs."""
    key_params, key_env, key = jax.random.split(key, 3)
    dummy = jnp.zeros((1,) + env.obs_shape, jnp.float32)
    recurrent = getattr(network, "recurrent", False)
    if recurrent:
        example = (network.initialize_carry((1,)), dummy, jnp.zeros((1,), jnp.bool_))
        params = init_network(network, key_params, *example, perf=network.perf)
    else:
        params = init_network(network, key_params, dummy, perf=network.perf)
    env_state, obs = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(key_env, num_envs), env_params)
    return ActorCriticState(
        params=params,
        opt_state=optim.init(params, ADAM_EPS, optimizer),
        lr=jnp.asarray(hp.lr, jnp.float32),
        obs_stats=normalize.init(env.obs_shape),
        return_stats=normalize.init(()),
        discounted_return=jnp.zeros((num_envs,), jnp.float32),
        value_stats=normalize.init(()),
        env_state=env_state,
        obs=obs,
        key=key,
        carry=network.initialize_carry((num_envs,)) if recurrent else None,
    )


class Rollout(NamedTuple):
    """What an actor-critic learner learns from: ``T`` steps of ``N`` envs
    (behaviour log-probs and values recorded at collection) and the policy
    carry before the first step (recurrent policies; ``None`` otherwise)."""

    steps: Transition  # [T, N, ...]
    start_carry: Any = None  # [N, C]


class Prepared(NamedTuple):
    """A rollout turned into learner input by :func:`advantages`."""

    batch: Batch  # flat [num_steps * num_envs, ...] (recurrent policies: a SequenceBatch of [T, N, ...])
    targets: jax.Array  # [T, N] value targets (raw scale)
    done: jax.Array  # [T, N]
    return_stats: Any
    discounted: jax.Array
    value_stats: Any


def collect(
    state: ActorCriticState, env: Env, env_params: Any, network: ActorCritic, algo: Any
) -> tuple[ActorCriticState, Rollout]:
    """The in-program collect step: :func:`rollout`, with the policy carry it started from."""
    start_carry = state.carry
    state, traj = rollout(state, env, env_params, network, algo)
    return state, Rollout(traj, start_carry)


def advantages(state: ActorCriticState, batch: Rollout, hp: Any, network: ActorCritic, algo: Any) -> Prepared:
    """A :class:`Rollout` turned into learner input: rewards scaled (and
    normalized by the running std of the discounted return under
    ``normalize_reward``), GAE over the rollout, value targets (normalized under
    ``normalize_value``) and the flat minibatch source ``prepared.batch`` (for a
    recurrent policy the unflattened :class:`SequenceBatch`)."""
    traj, start_carry = batch
    done = jnp.logical_or(traj.terminated, traj.truncated)
    rewards, return_stats, discounted = traj.reward * hp.reward_scale, state.return_stats, state.discounted_return
    if algo.normalize_reward:
        # scale by the running std of the discounted return (reset at episode ends)
        def accumulate(g, inputs):
            r, d = inputs
            g = hp.gamma * g + r
            return jnp.where(d, 0.0, g), g

        discounted, returns_seen = jax.lax.scan(accumulate, discounted, (rewards, done))
        return_stats = normalize.update(return_stats, returns_seen)
        rewards = rewards * jax.lax.rsqrt(return_stats.var + 1e-8)
    advantage = gae(
        rewards,
        traj.value,
        traj.next_value,
        traj.terminated,
        done,
        hp.gamma,
        hp.gae_lambda,
        method=scan_method(algo.gae_method),
    )
    targets = advantage + traj.value
    old_values, value_targets, value_stats = traj.value, targets, state.value_stats
    if algo.normalize_value:  # the critic regresses normalized targets
        value_stats = normalize.update(value_stats, targets)
        scale = jax.lax.rsqrt(value_stats.var + 1e-8)
        old_values = (traj.value - value_stats.mean) * scale
        value_targets = (targets - value_stats.mean) * scale
    batch = Batch(prepare_obs(state, traj.obs, algo), traj.action, traj.log_prob, old_values, advantage, value_targets)
    if getattr(network, "recurrent", False):
        reset = jnp.concatenate([jnp.zeros_like(done[:1]), done[:-1]])
        batch = SequenceBatch(batch, start_carry, reset)
    else:
        batch = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), batch)
    return Prepared(batch, targets, done, return_stats, discounted, value_stats)


def make_policy(network: ActorCritic, env: Env, algo: Any) -> tuple[Any, Any]:
    """``(act, sample)``: the deterministic (mode) and sampled env actions of an
    actor-critic member's state, for any leading batch of observations. For a
    recurrent network both take and return the carry:
    ``(state, carry [..., C], obs [..., *obs], key) -> (carry, action)``."""
    if getattr(network, "recurrent", False):

        def act_recurrent(state: ActorCriticState, carry: jax.Array, obs: jax.Array, key: jax.Array):
            del key  # deterministic
            carry, features = network.apply(state.params, carry, prepare_obs(state, obs, algo), None, method="step")
            dist = distribution(network, state.params, network.apply(state.params, features, method="policy_from"))
            return carry, env_action(mode_action(dist), network, env)

        def sample_recurrent(state: ActorCriticState, carry: jax.Array, obs: jax.Array, key: jax.Array):
            carry, features = network.apply(state.params, carry, prepare_obs(state, obs, algo), None, method="step")
            dist = distribution(network, state.params, network.apply(state.params, features, method="policy_from"))
            return carry, env_action(sample_action(dist, key), network, env)

        return act_recurrent, sample_recurrent

    def act(state: ActorCriticState, obs: jax.Array, key: jax.Array) -> jax.Array:
        del key  # deterministic
        policy_out, _ = network.apply(state.params, prepare_obs(state, obs, algo))
        dist = distribution(network, state.params, policy_out)
        return env_action(mode_action(dist), network, env)

    def sample(state: ActorCriticState, obs: jax.Array, key: jax.Array) -> jax.Array:
        policy_out, _ = network.apply(state.params, prepare_obs(state, obs, algo))
        dist = distribution(network, state.params, policy_out)
        return env_action(sample_action(dist, key), network, env)

    return act, sample


def acting(state: ActorCriticState, hp: Any, update_idx: Any) -> ActorCriticState:
    """The actors' part of ``state`` (what ``behave`` reads): the parameters and
    the observation normalizer; the optimizer, the return and value statistics
    and the env fields stay with the learner (actors on Ray fetch this much)."""
    return state.replace(
        opt_state=None,
        return_stats=None,
        discounted_return=None,
        value_stats=None,
        env_state=None,
        obs=None,
        key=None,
        carry=None,
    )


def make_behaviour(network: ActorCritic, env: Env, algo: Any) -> tuple[Any, Any]:
    """``(behave, complete)`` of an actor-critic, for batches collected
    outside the compiled loop (:mod:`jaxrl.actors`):

    * ``behave(state, obs [N, *obs], key) -> (env action, Behaviour)``: a sampled
      action and what ``learn`` needs of it (the behaviour log-prob under the
      actor's — possibly older — parameters);
    * ``complete(state, steps) -> Rollout``: the actors' steps ``[T, N, ...]``
      (a :class:`Transition` with values left ``None``, or its other fields by name) with ``V(s_t)`` and
      ``V(final_obs_t)`` from the learner's current parameters, as IMPALA's and
      cleanba's learners do; ``learn`` then takes it as its own collect's.

    A recurrent network (:func:`make_recurrent_behaviour`) takes and returns the carry."""
    if getattr(network, "recurrent", False):
        return make_recurrent_behaviour(network, env, algo)

    def behave(state: ActorCriticState, obs: jax.Array, key: jax.Array) -> tuple[jax.Array, Behaviour]:
        policy_out = network.apply(state.params, prepare_obs(state, obs, algo), method=ActorCritic.policy)
        dist = distribution(network, state.params, policy_out)
        action = sample_action(dist, key)
        return env_action(action, network, env), Behaviour(action, log_prob(dist, action))

    def complete(state: ActorCriticState, steps: Any) -> Rollout:
        if not isinstance(steps, Transition):  # the actors' fields by name (jaxrl.actors.sebulba.STEP_FIELDS)
            steps = Transition(value=None, next_value=None, **{k: v for k, v in steps.items() if k != "cut"})

        def value_fn(x: jax.Array) -> jax.Array:
            raw = network.apply(state.params, prepare_obs(state, x, algo), method=ActorCritic.value)
            return value_of(state, raw, algo)

        both = value_fn(jnp.concatenate([steps.obs, steps.final_obs]))
        steps_n = steps.obs.shape[0]
        return Rollout(steps._replace(value=both[:steps_n], next_value=both[steps_n:]))

    return behave, complete


def make_recurrent_behaviour(network: Any, env: Env, algo: Any) -> tuple[Any, Any]:
    """:func:`make_behaviour` of a recurrent actor-critic:

    * ``behave(state, carry [N, C], obs [N, *obs], key) -> (carry, env action,
      Behaviour)``: the carry after ``s_t`` comes back; the actors keep it per env,
      restart it where an episode ended and record the carry each step was acted
      from (the field ``carry``);
    * ``complete(state, steps) -> Rollout``: with ``h_t`` the recorded carry before
      ``s_t``, one torso step from ``h_t`` on ``s_t`` gives ``V(s_t)`` and the carry
      after it, one more on ``final_obs_t`` gives ``V(final_obs_t)`` (as
      :func:`rollout_recurrent` does, with the learner's parameters); the rollout
      starts from each env's first recorded carry, which ``learn``'s sequence pass
      unrolls from. A column's steps are consecutive in time, so its carries are
      those the sequence pass recomputes under the actor's parameters."""

    def behave(
        state: ActorCriticState, carry: jax.Array, obs: jax.Array, key: jax.Array
    ) -> tuple[jax.Array, jax.Array, Behaviour]:
        carry, features = network.apply(state.params, carry, prepare_obs(state, obs, algo), None, method="step")
        dist = distribution(network, state.params, network.apply(state.params, features, method="policy_from"))
        action = sample_action(dist, key)
        return carry, env_action(action, network, env), Behaviour(action, log_prob(dist, action))

    def complete(state: ActorCriticState, steps: Any) -> Rollout:
        steps = dict(steps)
        carry = steps.pop("carry")  # [T, N, C]
        steps.pop("cut", None)
        traj = Transition(value=None, next_value=None, **steps)
        lead = traj.reward.shape  # [T, N]

        def torso(h: jax.Array, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
            flat = obs.reshape((-1,) + obs.shape[len(lead) :])
            h, features = network.apply(
                state.params, h.reshape(-1, h.shape[-1]), prepare_obs(state, flat, algo), None, method="step"
            )
            return h, features

        after, features = torso(carry, traj.obs)
        _, next_features = torso(after, traj.final_obs)

        def value(f: jax.Array) -> jax.Array:
            return value_of(state, network.apply(state.params, f, method="value_from"), algo).reshape(lead)

        return Rollout(traj._replace(value=value(features), next_value=value(next_features)), carry[0])

    return behave, complete


def validate_network(algo: Any, recurrent: bool = False) -> None:
    """The actor-critic settings PPO, A2C, REINFORCE and IMPALA share; ``recurrent``:
    the algorithm trains recurrent torsos (PPO does)."""
    validate_torso(algo, recurrent)
    require_one_of("algo.squash", algo.squash, ("tanh", "clip"), "tanh")
    if hasattr(algo, "gae_method"):  # the learners that use GAE (IMPALA's targets are V-trace)
        require_one_of("algo.gae_method", algo.gae_method, ("auto", "associative", "scan"), "auto")


class Parts(NamedTuple):
    """What every actor-critic ``make_agent`` builds the same way."""

    network: Any  # ActorCritic | RecurrentActorCritic
    optimizer: Any  # optax.GradientTransformation
    env_params: Any
    act: Any  # act(state, [carry,] obs, key): the deterministic policy
    sample: Any  # the sampling policy, same signature
    init: Any  # init(key, hp) -> ActorCriticState


def make_parts(algo: Any, env: Env, num_envs: int, env_params: Any, network: Any, optimizer: Any, perf: bool) -> Parts:
    """The network (``network``: a user torso or ``None``), the optimizer
    (``optimizer``: see :mod:`jaxrl.rl.optim`), the env parameters (default:
    the env's), both policies and ``init`` of an actor-critic agent."""
    network = make_network(algo, env, network, perf)
    optimizer = optim.make(optimizer, ADAM_EPS)
    env_params = env.default_params if env_params is None else env_params
    act, sample = make_policy(network, env, algo)

    def init(key: jax.Array, hp: Any) -> ActorCriticState:
        return init_state(key, hp, env, env_params, network, num_envs, optimizer)

    return Parts(network, optimizer, env_params, act, sample, init)
