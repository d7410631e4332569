"""What the replay-buffer learners (SAC, TD3, DQN) share: stepping ``N`` envs for
``T`` steps into transitions for the on-device buffer (:class:`Steps`, what
their ``learn`` takes: it adds them, then samples), the random-action warm-up's
size, the continuous-control transition and action scaling (SAC, TD3), n-step
windows (consecutive items of one env, and the return and bootstrap they give), the
prioritized buffer (:class:`Prioritized`: a ring buffer with a sum-tree of
priorities beside it), the checks of their common settings."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import struct

from jaxrl import perf as perf_lib
from jaxrl.core.checks import require_positive_int, require_update_count
from jaxrl.core.errors import ConfigError
from jaxrl.envs.core import Env
from jaxrl.rl import buffers, prioritized
from jaxrl.rl.qlearning import n_step_return

__all__ = [
    "Acting",
    "from_actors",
    "Prioritized",
    "prioritized_init",
    "prioritized_add",
    "prioritized_sample",
    "prioritized_update",
    "Steps",
    "Transition",
    "WindowTransition",
    "bootstrap_terms",
    "bootstrap_obs",
    "acted",
    "capacity",
    "sample",
    "validate_n_step",
    "cut_windows",
    "collect",
    "warmup_per_env",
    "warmup",
    "gradient_steps",
    "scale_action",
    "validate_replay",
]


class Steps(NamedTuple):
    """``T`` steps of ``N`` envs as a replay learner takes them: the ``T·N``
    buffer items (step-major) and, per step ``[T, N]``, the episode ends and
    statistics and the observations acted on (``[T, N, *obs]``, for the
    observation normalizer). Steps of host envs also say which steps do not
    follow their env's previous one (``cut`` ``[T, N]``: see :func:`cut_windows`)."""

    items: Any  # the algorithm's transition, leaves [T·N, ...]
    done: jax.Array
    episode_return: jax.Array
    episode_length: jax.Array
    seen_obs: jax.Array
    cut: jax.Array | None = None


class Transition(NamedTuple):
    """One stored transition of a continuous-action learner (SAC, TD3; leaves ``[...]`` per item)."""

    obs: jax.Array  # [*obs] raw
    action: jax.Array  # [d] in [-1, 1] (the policy's tanh output, before scaling to the env's bounds)
    reward: jax.Array  # []
    terminated: jax.Array  # [] bool
    next_obs: jax.Array  # [*obs] raw, pre-reset


class WindowTransition(NamedTuple):
    """A continuous-control :class:`Transition` that also records whether the
    episode ended there (terminated or truncated): what n-step windows stop at.
    Stored instead of :class:`Transition` when ``algo.n_step > 1``."""

    obs: jax.Array
    action: jax.Array
    reward: jax.Array
    terminated: jax.Array
    next_obs: jax.Array
    done: jax.Array  # [] bool


def bootstrap_terms(batch: Any, gamma: jax.Array, reward_scale: jax.Array = 1.0) -> tuple[jax.Array, jax.Array]:
    """``(R, discount)`` ``[B]`` of a batch (leaves ``[B]``, or ``[B, n]`` for n-step
    windows): the (scaled) return up to the bootstrap and what multiplies the
    bootstrap value, ``γ (1 − terminated)`` or ``γᵐ⁺¹ (1 − terminated_m)``
    (:func:`jaxrl.rl.qlearning.n_step_return`, ``m`` the window's stopping step)."""
    if batch.reward.ndim == 1:
        not_terminal = 1.0 - batch.terminated.astype(jnp.float32)
        return reward_scale * batch.reward, gamma * not_terminal
    ret, discount, _ = n_step_return(reward_scale * batch.reward, batch.terminated, batch.done, gamma)
    return ret, discount


def bootstrap_obs(batch: Any) -> jax.Array:
    """The observation each target bootstraps from ``[B, *obs]``: ``next_obs``, or
    for n-step windows that of the window's stopping step."""
    if batch.reward.ndim == 1:
        return batch.next_obs
    _, _, last = n_step_return(batch.reward, batch.terminated, batch.done, 1.0)
    index = last.reshape(last.shape + (1,) * (batch.next_obs.ndim - 1))
    return jnp.take_along_axis(batch.next_obs, index, axis=1)[:, 0]


def acted(batch: Any) -> tuple[jax.Array, jax.Array]:
    """``(obs, action)`` ``[B, ...]`` that the values are learned at: the batch's
    own, or each n-step window's first."""
    if batch.reward.ndim == 1:
        return batch.obs, batch.action
    return batch.obs[:, 0], batch.action[:, 0]


def capacity(algo: Any, num_envs: int) -> int:
    """Buffer slots: ``algo.buffer_size``, rounded up to whole steps of the ``N``
    envs with n-step windows (an env's consecutive steps then lie ``N`` slots apart)."""
    if getattr(algo, "n_step", 1) == 1:
        return algo.buffer_size
    return -(-algo.buffer_size // num_envs) * num_envs


def sample(buffer: Any, key: jax.Array, shape: tuple[int, ...], n_step: int, num_envs: int) -> jax.Array:
    """Slot indices of uniformly drawn items ``[*shape]``, or with ``n_step > 1`` of
    whole windows of ``n_step`` consecutive steps of one env ``[*shape, n_step]``."""
    if n_step == 1:
        return buffers.sample_indices(buffer, key, shape)
    return buffers.sequence_indices(buffer, key, shape, n_step, num_envs)


def validate_n_step(config: Any) -> None:
    """A buffer that holds a window of every env, and a first update that has one."""
    algo = config.algo
    if algo.n_step == 1:
        return
    window = algo.n_step * config.num_envs
    if algo.buffer_size < window:
        raise ConfigError(
            "algo.n_step",
            algo.n_step,
            f"needs a buffer of at least n_step × num_envs = {window} transitions (algo.buffer_size={algo.buffer_size})",
            "pass a smaller algo.n_step or a larger algo.buffer_size",
        )
    span = (algo.n_step - 1) * config.num_envs  # slots from a window's first item to its last
    written = warmup(algo, config.num_envs) + config.num_envs * algo.num_steps
    if written <= span:
        raise ConfigError(
            "algo.learning_starts",
            algo.learning_starts,
            f"leaves the first update no whole {algo.n_step}-step window: the warm-up plus one update "
            f"({written} transitions) must exceed (n_step − 1) × num_envs = {span}",
            f"pass algo.learning_starts={span} or more",
        )


def cut_windows(buffer: buffers.ReplayBuffer, items: Any, cut: jax.Array | None) -> tuple[buffers.ReplayBuffer, Any]:
    """The buffer and the items ``[T·N]`` about to be added to it (n-step
    windows: items with a ``done`` field), each item's ``done`` set where a
    window must stop so that none bridges a gap in an env's steps.

    A host env's actors deliver each env's steps in order, but may drop some
    (steps older than the lag bound) or restart its episodes (on resume, or in a
    replaced runner); the step after such a gap is marked ``cut``. The item
    before a cut step is then made to end its windows (``done``): a window
    stops there and bootstraps from that item's own next observation, a
    truncated n-step return, as at a time limit. Items lie step-major, an env's
    consecutive steps ``N`` slots apart, so the item before env ``j``'s first
    step is the buffer's last of that env (``position − N + j``). ``cut``
    ``[T, N]`` (None: steps of the compiled loop, which has no gaps)."""
    if cut is None:
        return buffer, items
    n = cut.shape[1]
    last = (buffer.position - n + jnp.arange(n)) % buffer.capacity
    ended = buffer.data.done[last] | cut[0]  # (an empty buffer's slots: overwritten before they are read)
    buffer = buffer.replace(data=buffer.data._replace(done=buffer.data.done.at[last].set(ended)))
    later = jnp.concatenate([cut[1:], jnp.zeros_like(cut[:1])]).reshape(-1)  # each item's successor's cut
    return buffer, items._replace(done=items.done | later)


class Acting(NamedTuple):
    """What the actors of a host env are handed of a continuous-control replay
    learner's member (SAC, TD3; ``Agent.acting``): not its replay buffer."""

    actor_params: Any
    obs_stats: Any  # jaxrl.rl.normalize.RunningStats
    random: jax.Array  # bool []: the buffer holds less than the warm-up, act uniformly at random
    sigma: jax.Array  # float32 []: TD3's exploration noise σ, per_env: the largest an env draws (SAC: 0)
    rho: jax.Array  # float32 []: TD3's AR(1) noise correlation ρ (SAC: 0)


def from_actors(steps: Any, item: Callable[[dict[str, jax.Array]], Any] | None = None, windows: bool = False) -> Steps:
    """The actors' steps ``[T, N, ...]`` (:mod:`jaxrl.actors`, a mapping by field
    name) as a replay learner's batch: one buffer item per step in step order, as
    :func:`collect` stores them, each bootstrapping from its pre-reset
    ``final_obs`` unless it terminated. ``item(fields)`` builds the items from the
    flattened fields ``[T·N, ...]`` (with ``done``: terminated or truncated); the
    default is the continuous-control :class:`Transition` (:class:`WindowTransition`
    with ``windows``)."""
    count = steps["reward"].shape[0] * steps["reward"].shape[1]
    done = jnp.logical_or(steps["terminated"], steps["truncated"])
    fields = {name: jnp.reshape(x, (count,) + x.shape[2:]) for name, x in {**steps, "done": done}.items()}
    if item is not None:
        items = item(fields)
    else:
        names = ("obs", "action", "reward", "terminated", "final_obs") + (("done",) if windows else ())
        items = (WindowTransition if windows else Transition)(*(fields[name] for name in names))
    return Steps(items, done, steps["episode_return"], steps["episode_length"], steps["obs"], steps.get("cut"))


def scale_action(action: jax.Array, low: jax.Array, high: jax.Array) -> jax.Array:
    """An action in ``[-1, 1]`` scaled to the env's bounds ``[low, high]``."""
    return low + (action + 1.0) * 0.5 * (high - low)


def collect(
    env: Env,
    env_params: Any,
    env_state: Any,
    obs: jax.Array,
    key_env: jax.Array,
    draws: Any,
    policy: Callable[[jax.Array, Any], tuple[jax.Array, jax.Array]],
    item: Callable[[jax.Array, jax.Array, Any], Any],
    perf: bool,
) -> tuple[Any, jax.Array, Steps]:
    """Step the envs once per leading entry of ``draws`` (a pytree ``[T, N, ...]`` of
    the policy's randomness, drawn up front by the caller): ``(env_state, obs,
    steps)`` with the items in step order (``buffers.add(buffer, steps.items)``
    stores them). ``policy(obs [N, *obs], draw [N, ...]) -> (stored action, env
    action)``; ``item(obs, stored action, env step output) ->`` one buffer item per
    env. The env randomness of all steps is drawn here in one call
    (:meth:`Env.draw_steps`), so the loop runs only the policy and the env."""
    steps, num_envs = jax.tree.leaves(draws)[0].shape[:2]
    step_envs = jax.vmap(env.step_drawn, in_axes=(0, 0, 0, None))
    env_draws = env.draw_steps(jax.random.split(key_env, (steps, num_envs)), env_params)

    def one(carry, inputs):
        env_state, obs = carry
        draw, env_draw = inputs
        stored, action = policy(obs, draw)
        env_state, out = step_envs(env_draw, env_state, action, env_params)
        return (env_state, out.obs), (item(obs, stored, out), out.done, out.episode_return, out.episode_length, obs)

    (env_state, obs), (items, done, ep_return, ep_length, seen) = perf_lib.scan(perf)(
        one, (env_state, obs), (draws, env_draws), length=steps
    )
    flat = jax.tree.map(lambda x: x.reshape((steps * num_envs,) + x.shape[2:]), items)
    return env_state, obs, Steps(flat, done, ep_return, ep_length, seen)


def warmup_per_env(learning_starts: int, num_envs: int) -> int:
    """Warm-up env steps per env: ``⌈learning_starts / N⌉``."""
    return -(-int(learning_starts) // num_envs)


def warmup(algo: Any, num_envs: int) -> int:
    """Env steps per member of the random-action warm-up, whole steps of all envs
    (:attr:`jaxrl.algos.Algorithm.warmup` of every replay learner)."""
    return warmup_per_env(algo.learning_starts, num_envs) * num_envs


def gradient_steps(algo: Any, num_envs: int) -> int:
    """Gradient steps per update: ``round(utd · N · num_steps)``, at least one."""
    return max(1, round(algo.utd * num_envs * algo.num_steps))


def validate_replay(config: Any, batch_example: int, buffer_example: int, steps_example: int = 1) -> None:
    """The settings every replay learner has: rollout size, batch, buffer, replay
    ratio, warm-up and a budget of at least the warm-up plus one update."""
    algo = config.algo
    require_positive_int("algo.num_steps", algo.num_steps, steps_example)
    require_positive_int("algo.batch_size", algo.batch_size, batch_example)
    require_positive_int("algo.buffer_size", algo.buffer_size, buffer_example)
    if not algo.utd > 0:
        raise ConfigError("algo.utd", algo.utd, "must be > 0 (gradient steps per env step)", "pass algo.utd=1")
    if isinstance(algo.learning_starts, bool) or not isinstance(algo.learning_starts, int) or algo.learning_starts < 0:
        raise ConfigError(
            "algo.learning_starts", algo.learning_starts, "must be an integer ≥ 0", "pass algo.learning_starts=1000"
        )
    if algo.buffer_size < algo.batch_size:
        raise ConfigError(
            "algo.buffer_size",
            algo.buffer_size,
            f"must hold at least one batch (algo.batch_size={algo.batch_size})",
            f"pass algo.buffer_size={max(buffer_example, algo.batch_size)} or a smaller algo.batch_size",
        )
    rollout = config.num_envs * algo.num_steps
    if algo.buffer_size < rollout:
        raise ConfigError(
            "algo.buffer_size",
            algo.buffer_size,
            f"must hold one update's transitions ({rollout})",
            "pass a larger algo.buffer_size",
        )
    if config.total_timesteps < rollout + algo.learning_starts:
        raise ConfigError(
            "total_timesteps",
            config.total_timesteps,
            f"is below the warm-up plus one update ({algo.learning_starts} + {rollout})",
            "pass a larger total_timesteps or a smaller algo.learning_starts",
        )
    require_update_count(config, rollout, algo.learning_starts)


@struct.dataclass
class Prioritized:
    """A ring buffer (:mod:`jaxrl.rl.buffers`) with a priority per slot
    (:mod:`jaxrl.rl.prioritized`): proportional prioritized replay (Schaul et al.,
    2016, arXiv:1511.05952). A slot's priority is where a sampled window may
    start; the newest ``window`` slots (whose n-step windows are not written yet)
    hold priority 0, so no window runs past the newest item or across the write
    pointer."""

    ring: buffers.ReplayBuffer
    tree: prioritized.SumTree
    max_priority: jax.Array  # float32 []: the largest priority given so far; new items get it


def prioritized_init(example: Any, capacity: int) -> Prioritized:
    """An empty prioritized buffer for items shaped like ``example``."""
    return Prioritized(buffers.init(example, capacity), prioritized.init(capacity), jnp.ones((), jnp.float32))


def prioritized_add(buffer: Prioritized, items: Any, window: int) -> Prioritized:
    """Write ``K`` items (``buffers.add``) and give slots their priorities: the
    new slots 0 while their windows are incomplete, and every slot whose
    window of ``window + 1`` slots (``window = (n − 1) N``) has just become
    whole the largest priority so far (one-step windows: the new slots at
    once). Needs ``K + window ≤ capacity``."""
    ring = buffer.ring
    capacity, count = ring.capacity, jax.tree.leaves(items)[0].shape[0]
    new = (ring.position + jnp.arange(count)) % capacity
    back = jnp.arange(count) - window  # the slot `window` before each new one, in write order
    ready = jnp.where(back + ring.size >= 0, (ring.position + back) % capacity, -1)
    index = jnp.concatenate([new, ready])
    priority = jnp.concatenate([jnp.zeros(count), jnp.full(count, buffer.max_priority)])
    tree = prioritized.update(buffer.tree, index, priority)
    return buffer.replace(ring=buffers.add(ring, items), tree=tree)


def prioritized_sample(
    buffer: Prioritized, key: jax.Array, batch_size: int, window: int, beta: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Window start slots int32 ``[B]`` drawn in proportion to their priorities
    (stratified), and their importance weights ``[B]`` at exponent ``beta``
    over the ``size − window`` slots that can start a window."""
    start, probs = prioritized.sample(buffer.tree, key, batch_size)
    valid = jnp.maximum(buffer.ring.size - window, 1)
    return start, prioritized.importance_weights(probs, valid, beta)


def prioritized_update(buffer: Prioritized, start: jax.Array, priority: jax.Array) -> Prioritized:
    """New priorities ``[B]`` for the sampled window starts ``[B]`` (the last
    given wins for a slot drawn twice)."""
    tree = prioritized.update(buffer.tree, start, priority)
    return buffer.replace(tree=tree, max_priority=jnp.maximum(buffer.max_priority, jnp.max(priority)))
