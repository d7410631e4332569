"""The actor–learner pipeline for host envs ("Sebulba": Hessel et al. 2021,
"Podracer architectures for scalable reinforcement learning", arXiv:2104.06272).

Actor threads step host vector envs (:mod:`jaxrl.envs.host`) and act with a
jitted policy on the actor device; each hands fixed-length trajectories of
``T`` steps through its own bounded queue to the learner, which runs the
algorithm's ``learn`` on them — the same pure ``learn`` the compiled loop runs
after its own collect. Every member (seed) of the run owns a slice of each
actor's envs and its own parameters, optimizer and normalizer; the learner
learns all members in one vmapped program.

Policy lag is bounded: trajectory ``k`` (learned by update ``k``) is collected
with parameters of version ≥ ``k − max_lag`` (version ``v``: after ``v``
updates). ``max_lag=0`` is lock-step; ``max_lag=1`` lets the actors collect the
next trajectory while the learner learns from the last one.

The pipeline measures itself: per update, the actors' env-step, inference,
device↔host copy and waiting times, the learner's waiting and learning times,
the lag of the steps it learned from, and a verdict — which side bounds the run
— with the lever to pull (:func:`verdict`).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from jaxrl.envs.host import HostVecEnv, failed_env

__all__ = [
    "ActorTimes",
    "Block",
    "HostEnvError",
    "LEVERS",
    "ParamStore",
    "TIME_FIELDS",
    "Sebulba",
    "Stopped",
    "Threads",
    "UpdateReport",
    "Collector",
    "hang_text",
    "time_policy",
    "take_columns",
    "verdict",
]

STEP_FIELDS = (
    "obs",
    "action",
    "log_prob",
    "reward",
    "terminated",
    "truncated",
    "final_obs",
    "episode_return",
    "episode_length",
    "cut",
)
# which side bounds the run when its busy time is this much above the other's
MARGIN = 1.25
LEVERS = {
    "rollout-bound": "more actor threads (actor.threads), more envs (num_envs) or async gymnasium envs (actor.envs=async)",
    "learner-bound": "fewer epochs or minibatches (algo.update_epochs, algo.num_minibatches) or longer rollouts",
    "balanced": "none needed",
}


class HostEnvError(RuntimeError):
    """An env raised, or hung, inside an actor: the run stops with this one line."""


class Stopped(Exception):
    """The pipeline was asked to stop (a signal, or another thread's failure)."""


@dataclass
class ActorTimes:
    """Where one actor's time for one trajectory went (seconds)."""

    env_s: float = 0.0  # host env steps
    infer_s: float = 0.0  # the jitted policy on the actor device (waiting for the device included)
    calls: int = 0  # policy calls
    copy_s: float = 0.0  # observations to the device, actions and records back
    param_wait_s: float = 0.0  # waiting for parameters within the lag bound
    put_wait_s: float = 0.0  # waiting for room in the queue (the learner is behind)
    env_steps: int = 0  # steps of all its envs (reset steps included)
    fetch_s: float = 0.0  # fetching the parameters from another process (Ray runners; part of param_wait_s)
    per_call_s: float = 0.0  # one policy call on its idle device, where the actor measured it itself (Ray runners)
    stale_steps: int = 0  # env steps it dropped, kept for this trajectory but older than the lag bound

    def busy_s(self, per_call_s: float) -> float:
        """Env steps, copies, parameter fetches and the policy's own compute (``calls × per_call_s``)."""
        return self.env_s + self.copy_s + self.fetch_s + min(self.infer_s, self.calls * per_call_s)


class Block(NamedTuple):
    """One actor's trajectory for one update."""

    # STEP_FIELDS (and a recurrent policy's carry), each [M, T, n, ...] (member, step, env)
    steps: dict[str, np.ndarray]
    times: ActorTimes
    versions: tuple[int, int]  # oldest and newest parameter version its steps were taken with


class UpdateReport(NamedTuple):
    """The pipeline's figures for one update."""

    actor_env_s: float  # summed over actors
    actor_infer_s: float  # the policy's own compute (calls × its time on an idle device)
    actor_copy_s: float
    actor_wait_s: float  # parameter, queue and device waits (a policy call queued behind learning), summed
    learner_wait_s: float  # the learner waiting for trajectories
    learn_s: float
    lag_min: int
    lag_max: int
    lag_mean: float
    steps_per_s: float  # env steps learned per second of the update's wall time
    verdict: str
    fetch_s: float = 0.0  # Ray runners: one runner's fetch of the broadcast parameters (mean over runners)
    transfer_s: float = 0.0  # Ray runners: one trajectory's transfer to the learner (mean over runners)
    replaced: int = 0  # Ray runners replaced while this update's trajectories were collected
    dropped: int = 0  # trajectories dropped with them (never learned from)
    stale_steps: int = 0  # env steps the actors dropped past the lag bound (never learned from), summed

    def to_json(self) -> dict[str, Any]:
        out = self._asdict()
        return {k: round(v, 6) if isinstance(v, float) else v for k, v in out.items()}


# the UpdateReport fields that are seconds per update
TIME_FIELDS = ("actor_env_s", "actor_infer_s", "actor_copy_s", "actor_wait_s", "learner_wait_s", "learn_s")


def verdict(actor_busy_s: float, learn_s: float) -> str:
    """``rollout-bound`` when the slowest actor's busy time (env steps,
    copies and the policy's own compute) exceeds the learner's by
    :data:`MARGIN`, ``learner-bound`` the other way round, else ``balanced``.
    Busy times (not waits) decide, so that lock-step runs, where both sides
    wait by construction, get the same answer as overlapped ones; a policy
    call that queues behind the learner's program on a shared device counts
    as waiting, not as inference (:meth:`Sebulba.time_policy`)."""
    if actor_busy_s > MARGIN * learn_s:
        return "rollout-bound"
    if learn_s > MARGIN * actor_busy_s:
        return "learner-bound"
    return "balanced"


class ParamStore:
    """The newest parameters the learner published, with their version."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._state: Any = None
        self._version = -1

    def publish(self, state: Any, version: int) -> None:
        with self._cond:
            self._state, self._version = state, version
            self._cond.notify_all()

    def get(self, min_version: int, stop: threading.Event) -> tuple[Any, int]:
        """The newest parameters, waiting until their version is ≥ ``min_version``."""
        with self._cond:
            while self._version < min_version:
                if stop.is_set():
                    raise Stopped
                self._cond.wait(0.05)
            return self._state, self._version


class _Raw(NamedTuple):
    fields: dict[str, np.ndarray]  # STEP_FIELDS (and a recurrent policy's carry), each [N, ...]
    valid: np.ndarray  # [N] bool
    version: int


def take_columns(raw: list[_Raw], steps: int) -> tuple[dict[str, np.ndarray], list[_Raw], tuple[int, int]]:
    """The first ``steps`` valid steps of every env as ``[T, N, ...]`` arrays,
    and what is left over (each env's later steps, kept for the next block).

    Envs advance through valid steps at their own pace (a backend's reset step
    is not a transition), so each env's column is gathered on its own; the
    steps of one column stay consecutive in time."""
    valid = np.stack([r.valid for r in raw])  # [S, N]
    n = valid.shape[1]
    idx = np.empty((steps, n), np.int64)
    for j in range(n):
        idx[:, j] = np.flatnonzero(valid[:, j])[:steps]
    cols = np.arange(n)
    out = {k: np.stack([r.fields[k] for r in raw])[idx, cols] for k in raw[0].fields}
    versions = np.asarray([r.version for r in raw])[idx]
    last = idx[-1]  # each env's last used step
    start = int(last.min()) + 1
    left = []
    for s in range(start, len(raw)):
        keep = raw[s].valid & (s > last)
        if keep.any():
            left.append(raw[s]._replace(valid=keep))
    return out, left, (int(versions.min()), int(versions.max()))


class Collector:
    """One actor's acting, whatever carries its trajectories away (a thread's
    queue, a Ray runner's return value): its vector env of ``members ×
    per_member`` envs (member-major), its PRNG key, the running episode
    statistics and the steps it carries over from one trajectory to the next.

    ``policy(state, obs [M, n, *obs], key, step) -> (env action, record)`` acts;
    ``to_device`` puts observations where the policy runs; ``stopped()`` is
    polled between env steps (true: raise :class:`Stopped`); ``fresh_episodes``:
    every trajectory starts by resetting all envs (env ``i`` seeded ``seed + 7919 ·
    update + i``) and drops the steps kept from the last. A recurrent policy
    (``carry``: the carry an episode starts from, ``[M, n, C]``) takes and returns
    the carry, ``policy(state, obs, key, step, carry) -> (env action, record,
    carry)``: the collector keeps it per env — unchanged over a backend's reset
    step, restarted after an episode's end — and records the carry each step was
    acted from (field ``carry``)."""

    def __init__(
        self,
        env: HostVecEnv,
        policy: Callable[..., Any],
        *,
        members: int,
        per_member: int,
        num_steps: int,
        max_lag: int,
        key: Any,
        seed: int,
        to_device: Callable[[np.ndarray], Any] = lambda x: x,
        stopped: Callable[[], bool] = lambda: False,
        carry: np.ndarray | None = None,
        fresh_episodes: bool = False,
    ):
        import jax

        self.env, self.policy, self.key, self.seed = env, policy, key, seed
        self.members, self.per_member, self.num_steps, self.max_lag = members, per_member, num_steps, max_lag
        self.to_device, self.stopped, self.block = to_device, stopped, jax.block_until_ready
        self.stepping_since: float | None = None  # monotonic time an env step began (None: not stepping)
        self.env_steps = 0  # vector steps taken
        self.obs: np.ndarray | None = None
        self.counter = 0
        self.raw: list[_Raw] = []
        n = members * per_member
        self.ret, self.length = np.zeros(n, np.float64), np.zeros(n, np.int64)
        self.cut = np.ones(n, bool)  # per env: its next step does not follow its last delivered one (fresh episodes)
        self.start = None if carry is None else np.asarray(carry).reshape(n, -1)  # an episode's first carry
        self.carry = None if carry is None else self.start.copy()  # [n, C] each env's carry now
        self.fresh_episodes = fresh_episodes

    def _drop_stale(self, update: int) -> int:
        """Drop the kept steps older than the lag bound (returns how many); the first later
        step of an env that lost steps is marked ``cut`` (an n-step window must not bridge the gap)."""
        fresh = [r.version >= update - self.max_lag for r in self.raw]
        lost, count = np.zeros_like(self.cut), 0
        for r, keep in zip(self.raw, fresh, strict=True):
            if not keep:
                lost |= r.valid
                count += int(r.valid.sum())
        self.raw = [r for r, keep in zip(self.raw, fresh, strict=True) if keep]
        for r in self.raw:
            first = lost & r.valid
            r.fields["cut"][first] = True
            lost &= ~first
        self.cut |= lost
        return count

    def _timed(self, call: Callable[[], Any]) -> Any:
        self.stepping_since = time.monotonic()
        try:
            return call()
        finally:
            self.stepping_since = None

    def collect(self, update: int, state: Any, version: int, times: ActorTimes) -> Block:
        """Trajectory ``update`` (``num_steps`` valid steps of every env), acting
        with ``state`` (parameters of ``version``); ``times`` fills with where the time went."""
        members, per_member, steps = self.members, self.per_member, self.num_steps
        n = members * per_member
        if self.fresh_episodes:  # every trajectory starts fresh episodes: the kept steps belong to old ones
            self.obs = self._timed(lambda: self.env.reset(self.seed + 7_919 * update))
            self.raw, self.cut[:], self.ret[:], self.length[:] = [], True, 0.0, 0
            if self.carry is not None:
                self.carry = self.start.copy()
        elif self.obs is None:
            self.obs = self._timed(lambda: self.env.reset(self.seed))
        times.stale_steps += self._drop_stale(update)  # no step older than the lag bound
        count = np.sum([r.valid for r in self.raw], axis=0) if self.raw else np.zeros(n, np.int64)
        ret, length, obs = self.ret, self.length, self.obs
        while int(np.min(count)) < steps:
            if self.stopped():
                raise Stopped
            t0 = time.perf_counter()
            obs_dev = self.to_device(obs.reshape(members, per_member, *obs.shape[1:]))
            t1 = time.perf_counter()
            if self.carry is None:
                action, record = self.policy(state, obs_dev, self.key, np.int32(self.counter))
            else:
                carry_dev = self.to_device(self.carry.reshape(members, per_member, -1))
                action, record, after = self.policy(state, obs_dev, self.key, np.int32(self.counter), carry_dev)
            self.block(action)
            t2 = time.perf_counter()
            action = np.asarray(action).reshape(n, *np.shape(action)[2:])
            record = {k: np.asarray(v).reshape(n, *np.shape(v)[2:]) for k, v in record._asdict().items()}
            if self.carry is not None:
                after = np.asarray(after).reshape(n, -1)
            t3 = time.perf_counter()
            out = self._timed(lambda action=action: self.env.step(action))
            t4 = time.perf_counter()
            times.copy_s += (t1 - t0) + (t3 - t2)
            times.infer_s += t2 - t1
            times.calls += 1
            times.env_s += t4 - t3
            times.env_steps += n
            self.counter += 1
            self.env_steps += 1
            ret += np.where(out.valid, out.reward, 0.0)
            length += out.valid
            done = (out.terminated | out.truncated) & out.valid
            fields = {
                "obs": obs,
                "action": record["action"],
                "log_prob": record["log_prob"],
                "reward": out.reward,
                "terminated": out.terminated,
                "truncated": out.truncated,
                "final_obs": out.final_obs,
                "episode_return": np.where(done, ret, 0.0).astype(np.float32),
                "episode_length": np.where(done, length, 0).astype(np.int32),
                "cut": self.cut & out.valid,
            }
            self.cut &= ~out.valid
            if self.carry is not None:  # a reset step keeps the carry; an episode's end restarts it
                fields["carry"] = self.carry
                self.carry = np.where(done[:, None], self.start, np.where(out.valid[:, None], after, self.carry))
            ret[done], length[done] = 0.0, 0
            self.raw.append(_Raw(fields, out.valid, version))
            count = count + out.valid
            obs = self.obs = out.obs
        columns, self.raw, versions = take_columns(self.raw, steps)
        block = {k: v.reshape(steps, members, per_member, *v.shape[2:]).swapaxes(0, 1) for k, v in columns.items()}
        return Block(block, times, versions)


def time_policy(
    policy: Callable[..., Any], state: Any, obs: Any, key: Any, calls: int = 20, carry: Any = None
) -> float:
    """Seconds of one call of ``policy`` on an idle device (the median of ``calls``;
    ``carry``: a recurrent policy's)."""
    import jax

    extra = () if carry is None else (carry,)
    seconds = []
    for i in range(calls):
        t0 = time.perf_counter()
        jax.block_until_ready(policy(state, obs, key, np.int32(-1 - i), *extra))
        seconds.append(time.perf_counter() - t0)
    return float(np.median(seconds))


class _Actor(threading.Thread):
    """One actor thread: a :class:`Collector` fed by the :class:`ParamStore`, its trajectories put in its own queue."""

    def __init__(self, threads: Threads, index: int, env: HostVecEnv, seed: int):
        super().__init__(name=f"jaxrl-actor-{index}", daemon=True)
        p = threads.pipeline
        self.threads, self.index = threads, index
        self.out: queue.Queue = queue.Queue(maxsize=max(1, p.max_lag + 1))
        self.failure: BaseException | None = None
        self.collector = Collector(
            env,
            p.policy,
            members=p.members,
            per_member=p.per_member,
            num_steps=p.num_steps,
            max_lag=p.max_lag,
            key=p.actor_key(index),
            seed=seed,
            to_device=p.to_actor,
            stopped=threads.stop.is_set,
            carry=p.carry,
            fresh_episodes=p.fresh_episodes,
        )

    def run(self) -> None:
        try:
            self._loop()
        except Stopped:
            pass
        except BaseException as error:  # any failure ends the run through the learner, in one line
            self.failure = error
            self.threads.stop.set()

    def _loop(self) -> None:
        t, p = self.threads, self.threads.pipeline
        for k in range(p.start_update, p.num_updates):
            times = ActorTimes()
            t0 = time.perf_counter()
            state, version = t.store.get(k - p.max_lag, t.stop)
            times.param_wait_s = time.perf_counter() - t0
            block = self.collector.collect(k, state, version, times)
            t0 = time.perf_counter()
            while True:
                if t.stop.is_set():
                    raise Stopped
                try:
                    self.out.put(block, timeout=0.05)
                    break
                except queue.Full:
                    continue
            times.put_wait_s = time.perf_counter() - t0


class Threads:
    """The actors as threads of this process: parameters through a
    :class:`ParamStore`, trajectories through one bounded queue per thread."""

    kind = "threads"
    unit = "actor"  # what the report calls one actor

    def __init__(self, pipeline: Sebulba, make_env: Callable[[int], HostVecEnv], threads: int, seed: int):
        self.pipeline, self.store, self.stop = pipeline, ParamStore(), threading.Event()
        self.actors = [_Actor(self, i, make_env(i), seed + 100_003 * i) for i in range(threads)]

    def __len__(self) -> int:
        return len(self.actors)

    def start(self) -> None:
        for actor in self.actors:
            actor.start()

    def publish(self, state: Any, version: int) -> float:
        self.store.publish(state, version)
        return 0.0

    def get(self, index: int, update: int, interrupted: Callable[[], bool]) -> tuple[Block, float]:
        """Actor ``index``'s trajectory ``update`` and the seconds its hand-over took (none: a queue)."""
        actor = self.actors[index]
        while True:
            self._check(actor)
            if interrupted():
                raise Stopped
            try:
                return actor.out.get(timeout=0.05), 0.0
            except queue.Empty:
                if not actor.is_alive() and actor.out.empty() and actor.failure is None:
                    raise HostEnvError(f"actor {actor.index} ended before trajectory {update}") from None

    def faults(self) -> tuple[int, int]:
        """Actors replaced and trajectories dropped since the last call: threads are never replaced."""
        return 0, 0

    def _check(self, actor: _Actor) -> None:
        for a in self.actors:
            if a.failure is not None:
                raise HostEnvError(
                    self.pipeline.failure_text(f"actor {a.index}", a.index, a.failure, a.collector.env_steps)
                ) from None
        since = actor.collector.stepping_since
        timeout = self.pipeline.timeout_s
        if timeout > 0 and since is not None and time.monotonic() - since > timeout:
            self.stop.set()
            raise HostEnvError(
                hang_text(f"actor {actor.index}", time.monotonic() - since, timeout, actor.collector.env_steps)
            )

    def close(self, timeout: float = 5.0) -> list[str]:
        self.stop.set()
        stuck = []
        for actor in self.actors:
            actor.join(timeout)
            if actor.is_alive():
                stuck.append(actor.name)
                continue
            try:
                actor.collector.env.close()
            except Exception:  # closing a broken env must not hide why the run stopped
                pass
        return stuck


def hang_text(who: str, seconds: float, timeout: float, steps: int) -> str:
    """The one line of an env step that has not returned within ``actor.timeout_s``."""
    return (
        f"actor.timeout_s: an env step of {who} has not returned for {seconds:.0f} s (> {timeout:g} s) "
        f"at its step {steps}: the env hangs; fix it, or raise actor.timeout_s if its steps are this slow"
    )


class Sebulba:
    """The pipeline: :meth:`start` the actors, then per update :meth:`collect`
    a batch and :meth:`publish` the learner's new state; :meth:`close` at the end.

    ``policy(state, obs [M, n, *obs], key, step) -> (env action [M, n, ...], record)``
    is the members' jitted acting (with ``fold_in(key, step)``) (``record``: a NamedTuple with ``action`` and
    ``log_prob`` ``[M, n, ...]``); ``make_env(i)`` builds actor ``i``'s vector env
    of ``members × per_member`` envs (member-major). ``view(state, version)``: what the
    actors are handed of the learner's state to collect trajectory ``version`` (``policy``
    reads it; None: the whole state). ``transport(pipeline)``: where the actors run and how
    parameters and trajectories travel (None: :class:`Threads`, ``threads`` of them;
    :class:`jaxrl.actors.ray_runners.RayRunners`: env runners on Ray). ``carry``: a
    recurrent policy's carry at an episode's start; ``fresh_episodes``: every
    trajectory starts fresh episodes (both: :class:`Collector`)."""

    def __init__(
        self,
        *,
        make_env: Callable[[int], HostVecEnv],
        policy: Callable[..., Any],
        members: int,
        per_member: int,
        threads: int,
        num_steps: int,
        num_updates: int,
        max_lag: int,
        timeout_s: float,
        seed: int,
        key: Any,
        actor_device: Any = None,
        start_update: int = 0,
        describe_env: Callable[[int, int], str] = lambda actor, env: f"env {env} of actor {actor}",
        view: Callable[[Any, int], Any] | None = None,
        transport: Callable[[Sebulba], Any] | None = None,
        carry: np.ndarray | None = None,
        fresh_episodes: bool = False,
    ):
        import jax

        self.members, self.per_member, self.num_steps = members, per_member, num_steps
        self.num_updates, self.max_lag, self.timeout_s = num_updates, max_lag, timeout_s
        self.start_update, self.seed = start_update, seed
        self.policy, self.describe_env, self.view = policy, describe_env, view
        self.carry = carry  # a recurrent policy's carry at an episode's start [M, per_member, C] (None: memoryless)
        self.fresh_episodes = fresh_episodes  # every trajectory starts fresh episodes (Collector)
        self._key, self._device = key, actor_device
        self.block = jax.block_until_ready
        self.per_call_s = 0.0
        self.transport = Threads(self, make_env, threads, seed) if transport is None else transport(self)

    def actor_key(self, actor: int) -> Any:
        """Actor ``actor``'s PRNG key; its step ``t`` acts with ``fold_in(key, t)`` (inside ``policy``)."""
        import jax

        return jax.random.fold_in(self._key, actor)

    def to_actor(self, x: np.ndarray) -> Any:
        import jax

        return jax.device_put(x, self._device) if self._device is not None else x

    def start(self, state: Any, version: int, obs_shape: tuple[int, ...]) -> None:
        """Publish the first parameters, time the policy on the idle device, start the actors."""
        self.publish(state, version)
        self.per_call_s = self.time_policy(state, obs_shape)
        self.transport.start()

    def time_policy(self, state: Any, obs_shape: tuple[int, ...], calls: int = 20) -> float:
        """Seconds of one policy call on the idle device (median of ``calls``): the
        report splits an actor's inference time into this compute and the waiting
        for a device busy with learning (on one device, or a CPU's shared client)."""
        if self.view is not None:
            state = self.view(state, np.int32(self.start_update))
        if self._device is not None:
            import jax

            state = jax.device_put(state, self._device)
        obs = self.to_actor(np.zeros((self.members, self.per_member, *obs_shape), np.float32))
        carry = None if self.carry is None else self.to_actor(self.carry)
        return time_policy(self.policy, state, obs, self.actor_key(0), calls, carry)

    def publish(self, state: Any, version: int) -> float:
        """Hand the learner's state (version: updates done) to the actors; returns the copy's seconds."""
        import jax

        t0 = time.perf_counter()
        if self.view is not None:
            state = self.view(state, np.int32(version))
        if self._device is not None:
            state = jax.device_put(state, self._device)
        self.transport.publish(state, version)
        return time.perf_counter() - t0

    def collect(
        self, update: int, interrupted: Callable[[], bool] = lambda: False
    ) -> tuple[dict[str, np.ndarray], Any]:
        """Trajectory ``update`` of every actor, joined along the env axis
        (``[M, T, N, ...]``), and the seconds waited. Raises :class:`HostEnvError`
        when an actor failed or an env hung, :class:`Stopped` when ``interrupted()``."""
        blocks, waited, transfer = [], 0.0, []
        for index in range(len(self.transport)):
            t0 = time.perf_counter()
            block, seconds = self.transport.get(index, update, interrupted)
            blocks.append(block)
            transfer.append(seconds)
            waited += time.perf_counter() - t0
        steps = {k: np.concatenate([b.steps[k] for b in blocks], axis=2) for k in blocks[0].steps}
        return steps, (blocks, waited, transfer)

    def report(self, update: int, collected: Any, learn_s: float, wall_s: float) -> UpdateReport:
        """The :class:`UpdateReport` of ``update`` from what :meth:`collect` returned and the learner's times."""
        blocks, waited, transfer = collected
        times = [b.times for b in blocks]
        per_call = [t.per_call_s or self.per_call_s for t in times]
        infer = [min(t.infer_s, t.calls * c) for t, c in zip(times, per_call, strict=True)]
        lags = [update - b.versions[0] for b in blocks] + [update - b.versions[1] for b in blocks]
        steps = self.members * self.per_member * len(blocks) * self.num_steps
        replaced, dropped = self.transport.faults()
        return UpdateReport(
            actor_env_s=sum(t.env_s for t in times),
            actor_infer_s=sum(infer),
            actor_copy_s=sum(t.copy_s for t in times),
            actor_wait_s=sum(t.param_wait_s - t.fetch_s + t.put_wait_s + t.infer_s for t in times) - sum(infer),
            learner_wait_s=waited,
            learn_s=learn_s,
            lag_min=int(min(lags)),
            lag_max=int(max(lags)),
            lag_mean=float(np.mean([update - 0.5 * (b.versions[0] + b.versions[1]) for b in blocks])),
            steps_per_s=steps / wall_s if wall_s > 0 else 0.0,
            verdict=verdict(max(t.busy_s(c) for t, c in zip(times, per_call, strict=True)), learn_s),
            fetch_s=float(np.mean([t.fetch_s for t in times])),
            transfer_s=float(np.mean(transfer)),
            replaced=replaced,
            dropped=dropped,
            stale_steps=sum(t.stale_steps for t in times),
        )

    def failure_text(self, who: str, index: int, error: BaseException, steps: int) -> str:
        """The one line of actor ``index``'s failure (``who``: how the report names it)."""
        env = failed_env(error)
        where = self.describe_env(index, env) if env is not None else who
        text = str(error).split("\n")[0]
        if env is not None:
            text = text.split(": ", 1)[1] if ": " in text else text
        else:
            text = f"{getattr(error, 'type_name', type(error).__name__)}: {text}"
        return f"{where} raised at step {steps}: {text}"

    def close(self, timeout: float = 5.0) -> list[str]:
        """Stop the actors and close their envs; returns the names of threads
        still inside an env step (a hung env cannot be interrupted: daemon threads)."""
        return self.transport.close(timeout)
