"""Env runners on Ray: the actor–learner pipeline's actors as Ray actors
(``actor=ray``), so a rollout-bound run scales out by adding CPUs anywhere in
a Ray cluster.

Each runner is a Ray actor placed in its own bundle of a placement group; it
builds its own host vector env and jitted CPU policy, and runs the very
:class:`~jaxrl.actors.sebulba.Collector` an actor thread runs. Only the
transport differs from :class:`~jaxrl.actors.sebulba.Threads`: the learner's
parameters are put in Ray's object store once per version (every runner reads
that one object), and each ``collect`` call returns one trajectory through it.
The learner submits a runner's calls ahead by at most ``max_lag`` updates,
each with the newest parameters it has, so trajectory ``k`` is always
collected with parameters of version ≥ ``k − max_lag``.

A runner that dies (its process killed, its node lost) is replaced in its
bundle; the calls it had are dropped, never half-used, and counted. An env
that raises inside a runner stops the run (a replacement would raise again).
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from jaxrl.actors.sebulba import (
    ActorTimes,
    Block,
    Collector,
    HostEnvError,
    Sebulba,
    Stopped,
    hang_text,
    time_policy,
)
from jaxrl.core.errors import ConfigError, install_command
from jaxrl.envs.host import HostVecEnv
from jaxrl.perf import platform

__all__ = ["STRATEGIES", "RayRunners", "RunnerParts", "connect", "live_runners"]

STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
NAMESPACE = "jaxrl"
PLACE_TIMEOUT_S = 120.0  # seconds the cluster may take to place the runners' bundles


class RunnerParts(NamedTuple):
    """What a runner builds in its own process (from a picklable ``build()``)."""

    env: HostVecEnv  # members × per_member envs, member-major
    policy: Callable[..., Any]  # (state, obs [M, n, *obs], key, step[, carry]) -> (env action, record[, carry]), jitted
    obs_shape: tuple[int, ...]


class _Failed(Exception):
    """An env (or the policy) raised inside a runner: what the learner needs for its one line."""

    def __init__(self, text: str, type_name: str, steps: int):
        super().__init__(text, type_name, steps)
        self.text, self.type_name, self.steps = text, type_name, steps


class _Runner:
    """One env runner (the class Ray wraps): a :class:`Collector` over the env and
    policy ``build()`` makes on its first call, in its own process."""

    def __init__(self, build: Callable[[], RunnerParts], collector: dict[str, Any]):
        self.build, self.settings = build, collector
        self.collector: Collector | None = None
        self.per_call_s = 0.0

    def prepare(self, params: list[Any]) -> float:
        """Build the env and the policy, compile it and time one call on this idle CPU; returns the seconds taken."""
        import jax
        import ray

        t0 = time.perf_counter()
        try:
            if self.collector is None:
                state = jax.device_put(ray.get(params[0]))
                parts = self.build()
                self.collector = Collector(parts.env, parts.policy, **self.settings)
                obs = np.zeros((self.settings["members"], self.settings["per_member"], *parts.obs_shape), np.float32)
                carry = self.settings.get("carry")
                self.per_call_s = time_policy(parts.policy, state, obs, self.settings["key"], calls=10, carry=carry)
        except Exception as error:
            raise self._failed(error) from None
        return time.perf_counter() - t0

    def collect(self, update: int, params: list[Any], version: int) -> Block:
        """Trajectory ``update`` with the parameters of ``version`` (``params``: their object ref, in a list
        so that Ray hands the ref, not the value, and the fetch is timed here)."""
        import jax
        import ray

        if self.collector is None:
            self.prepare(params)
        try:
            t0 = time.perf_counter()
            state = jax.device_put(ray.get(params[0]))  # on the runner's CPU once per call, not per policy step
            fetch_s = time.perf_counter() - t0
            times = ActorTimes(param_wait_s=fetch_s, fetch_s=fetch_s, per_call_s=self.per_call_s)
            return self.collector.collect(update, state, version, times)
        except Exception as error:
            raise self._failed(error) from None

    def _failed(self, error: Exception) -> _Failed:
        """An env's or the policy's error as a picklable one line for the learner."""
        steps = self.collector.env_steps if self.collector is not None else 0
        return _Failed(str(error).split("\n")[0], type(error).__name__, steps)

    def probe(self) -> tuple[float | None, int]:
        """Seconds the current env step has run (None: not stepping) and the steps taken."""
        c = self.collector
        if c is None:
            return None, 0
        since = c.stepping_since
        return (None if since is None else time.monotonic() - since), c.env_steps

    def pid(self) -> int:
        return os.getpid()

    def close(self) -> None:
        if self.collector is not None:
            try:
                self.collector.env.close()
            except Exception:  # closing a broken env must not hide why the run stopped
                pass


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "actor", "ray", "needs ray, which is not installed", f"{install_command('ray')} (or pass actor=threads)"
        ) from None
    return ray


def _reachable(address: str) -> None:
    """A ``HOST:PORT`` (or ``ray://HOST:PORT``) that nothing answers on is one line, at once."""
    rest = address.removeprefix("ray://")
    host, _, port = rest.rpartition(":")
    fix = "start the cluster (ray start --head) or pass its head's HOST:PORT (actor.address=auto: the local one)"
    if not host or not port.isdigit():
        raise ConfigError("actor.address", address, "must be auto or HOST:PORT (ray://HOST:PORT for Ray Client)", fix)
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as error:
        raise ConfigError("actor.address", address, f"is unreachable ({error.strerror or error})", fix) from None


def connect(address: str, runners: int, cpus_per_runner: float, strategy: str) -> bool:
    """Join the Ray cluster at ``address`` ("": start a local Ray runtime) and check
    that it can hold ``runners`` × ``cpus_per_runner`` CPUs; returns whether this
    call started the runtime. Raises :class:`ConfigError` (nothing started left behind)."""
    if strategy not in STRATEGIES:
        raise ConfigError(
            "actor.strategy", strategy, f"must be one of {', '.join(STRATEGIES)}", "pass actor.strategy=PACK"
        )
    ray = _ray()
    started = False
    if not ray.is_initialized():
        if address and address != "auto":
            _reachable(address)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # os.fork() beside JAX's threads: Ray's processes exec at once
            try:
                quiet = {"log_to_driver": False, "namespace": NAMESPACE, "logging_level": logging.ERROR}
                if address:
                    ray.init(address=address, **quiet)
                else:
                    ray.init(address="local", include_dashboard=False, **quiet)  # a new one, never a cluster's
                    started = True
            except (ConnectionError, RuntimeError) as error:
                raise ConfigError(
                    "actor.address",
                    address,
                    f"could not be joined ({str(error).splitlines()[0][:160]})",
                    "start the cluster (ray start --head) or drop actor.address= for a local Ray runtime",
                ) from None
    resources = ray.cluster_resources()
    cpus = float(resources.get("CPU", 0.0))
    need = runners * cpus_per_runner
    if need > cpus + 1e-9:
        if started:
            ray.shutdown()
        fit = int(cpus // cpus_per_runner)
        raise ConfigError(
            "actor.runners",
            runners,
            f"× actor.cpus_per_runner={cpus_per_runner:g} asks for {need:g} CPUs and the Ray cluster has {cpus:g}",
            f"pass actor.runners={max(fit, 1)}"
            + (f" or actor.cpus_per_runner={cpus / runners:g}" if cpus else "")
            + " (or add nodes)",
        )
    nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
    if strategy == "STRICT_SPREAD" and runners > nodes:
        if started:
            ray.shutdown()
        raise ConfigError(
            "actor.strategy",
            strategy,
            f"puts each of actor.runners={runners} runners on its own node and the Ray cluster has {nodes}",
            "pass actor.strategy=SPREAD",
        )
    return started


def live_runners(tag: str | None = None) -> list[str]:
    """Names of this cluster's live jaxrl runners (those of run ``tag``, if given)."""
    import ray

    prefix = "jaxrl-runner-" + (f"{tag}-" if tag else "")
    named = ray.util.list_named_actors(all_namespaces=True)
    return sorted(a["name"] for a in named if a["namespace"] == NAMESPACE and a["name"].startswith(prefix))


class _Slot:
    """One runner's bundle: the live actor in it, its generation, its calls in flight."""

    def __init__(self) -> None:
        self.handle: Any = None
        self.generation = -1
        self.pending: dict[int, Any] = {}  # update -> object ref of its Block
        self.next = 0  # the next update to submit
        self.last_probe = 0.0


class RayRunners:
    """The transport of :class:`~jaxrl.actors.sebulba.Sebulba` on Ray: ``runners``
    env runners, one placement-group bundle of ``cpus_per_runner`` CPUs each.

    ``build(index, generation)`` returns the picklable callable a runner calls in
    its own process to make its :class:`RunnerParts`. Call :func:`connect` first."""

    kind = "ray"
    unit = "runner"

    def __init__(
        self,
        pipeline: Sebulba,
        *,
        build: Callable[[int, int], Callable[[], RunnerParts]],
        runners: int,
        cpus_per_runner: float,
        strategy: str,
        max_replaced: int,
        started: bool,
        log: Callable[[str], None] = lambda text: None,
    ):
        import ray

        self.ray, self.pipeline, self.build, self.log = ray, pipeline, build, log
        self.cpus, self.strategy, self.max_replaced, self.started = cpus_per_runner, strategy, max_replaced, started
        self.tag = uuid.uuid4().hex[:8]
        self.slots = [_Slot() for _ in range(runners)]
        self.params: tuple[Any, int] | None = None
        self.replaced = self.dropped = 0  # in all
        self._reported = (0, 0)
        self.put_s = 0.0
        self.pg: Any = None
        self.cls = ray.remote(concurrency_groups={"probe": 1})(_Runner)

    def __len__(self) -> int:
        return len(self.slots)

    def _collector_settings(self, index: int, generation: int) -> dict[str, Any]:
        import jax

        p = self.pipeline
        key = p.actor_key(index) if generation == 0 else jax.random.fold_in(p.actor_key(index), 1_000_003 + generation)
        return {
            "members": p.members,
            "per_member": p.per_member,
            "num_steps": p.num_steps,
            "max_lag": p.max_lag,
            "key": key,
            "seed": p.seed + 100_003 * index + 7_919 * generation,
            "carry": p.carry,
            "fresh_episodes": p.fresh_episodes,
        }

    def _spawn(self, index: int) -> None:
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        slot = self.slots[index]
        slot.generation += 1
        env_vars = platform.worker_env()  # one CPU device; env.module importable as in the learner's process
        slot.handle = self.cls.options(
            num_cpus=self.cpus,
            scheduling_strategy=PlacementGroupSchedulingStrategy(self.pg, placement_group_bundle_index=index),
            name=f"jaxrl-runner-{self.tag}-{index}-{slot.generation}",
            max_restarts=0,
            runtime_env={"env_vars": env_vars},
        ).remote(self.build(index, slot.generation), self._collector_settings(index, slot.generation))

    def start(self) -> None:
        """Place the bundles, start the runners, submit their first calls."""
        from ray.util.placement_group import placement_group

        self.pg = placement_group([{"CPU": self.cpus}] * len(self.slots), strategy=self.strategy)
        try:
            self.ray.get(self.pg.ready(), timeout=PLACE_TIMEOUT_S)
        except self.ray.exceptions.GetTimeoutError:
            raise HostEnvError(
                f"actor.runners: the Ray cluster could not place {len(self.slots)} runners of "
                f"{self.cpus:g} CPUs ({self.strategy}) in {PLACE_TIMEOUT_S:g} s; pass fewer actor.runners or "
                "actor.cpus_per_runner, or add nodes"
            ) from None
        for index, slot in enumerate(self.slots):
            slot.next = self.pipeline.start_update
            self._spawn(index)
        t0 = time.perf_counter()
        self._ready([slot.handle.prepare.remote([self.params[0]]) for slot in self.slots])
        self.log(f"{len(self.slots)} env runner(s) ready in {time.perf_counter() - t0:.1f} s (env, policy compiled)")
        self._submit()

    def _ready(self, refs: list[Any]) -> None:
        """Wait for the runners' ``prepare`` calls; an env that cannot be built is the run's one line."""
        ray = self.ray
        for index, ref in enumerate(refs):
            try:
                ray.get(ref)
            except ray.exceptions.RayTaskError as error:
                raise HostEnvError(self._failure_text(index, error)) from None
            except ray.exceptions.RayActorError as error:
                raise HostEnvError(f"runner {index} could not start: {str(error).splitlines()[0][:300]}") from None

    def publish(self, state: Any, version: int) -> float:
        """Put ``state`` in the object store once; every runner's next calls read that object."""
        import jax

        t0 = time.perf_counter()
        self.params = (self.ray.put(jax.device_get(state)), version)  # numpy leaves: read in place
        self.put_s = time.perf_counter() - t0
        if self.pg is not None:
            self._submit()
        return self.put_s

    def _submit(self) -> None:
        ref, version = self.params
        end = min(self.pipeline.num_updates, version + self.pipeline.max_lag + 1)
        for slot in self.slots:
            while slot.next < end:
                slot.pending[slot.next] = slot.handle.collect.remote(slot.next, [ref], version)
                slot.next += 1

    def get(self, index: int, update: int, interrupted: Callable[[], bool]) -> tuple[Block, float]:
        """Runner ``index``'s trajectory ``update`` and the seconds its transfer took; a runner
        that died is replaced (its trajectories dropped) and asked again."""
        ray, slot = self.ray, self.slots[index]
        waiting_since = time.monotonic()
        while True:
            if interrupted():
                raise Stopped
            ref = slot.pending[update]
            ready, _ = ray.wait([ref], timeout=0.05)
            if not ready:
                self._watch(index, waiting_since)
                continue
            t0 = time.perf_counter()
            try:
                block = ray.get(ref)
            except ray.exceptions.RayActorError as error:
                self._replace(index, update, error)
                waiting_since = time.monotonic()
                continue
            except ray.exceptions.RayTaskError as error:
                raise HostEnvError(self._failure_text(index, error)) from None
            del slot.pending[update]
            return block, time.perf_counter() - t0

    def _failure_text(self, index: int, error: Any) -> str:
        cause = getattr(error, "cause", None)
        if isinstance(cause, _Failed):
            return self.pipeline.failure_text(
                f"runner {index}", index, _Named(cause.type_name, cause.text), cause.steps
            )
        return f"runner {index} failed: {str(cause or error).splitlines()[0][:300]}"

    def _watch(self, index: int, waiting_since: float) -> None:
        """Ask a runner that keeps the learner waiting whether an env step hangs (``actor.timeout_s``)."""
        timeout, slot, now = self.pipeline.timeout_s, self.slots[index], time.monotonic()
        if timeout <= 0 or now - waiting_since < 1.0 or now - slot.last_probe < 1.0:
            return
        slot.last_probe = now
        ray = self.ray
        try:
            age, steps = ray.get(slot.handle.probe.options(concurrency_group="probe").remote(), timeout=timeout)
        except ray.exceptions.GetTimeoutError:  # a step that holds the runner's interpreter
            age, steps = time.monotonic() - waiting_since, -1
        except ray.exceptions.RayActorError:  # it died: the wait sees it and replaces it
            return
        if age is not None and age > timeout:
            raise HostEnvError(hang_text(f"runner {index}", age, timeout, steps))

    def _replace(self, index: int, update: int, error: Any) -> None:
        slot = self.slots[index]
        self.dropped += 1  # the trajectory it was collecting; the calls queued behind it had not begun
        self.replaced += 1
        if self.replaced > self.max_replaced:
            raise HostEnvError(
                f"actor.max_replaced: runner {index} died and {self.replaced - 1} runner(s) were replaced "
                f"already (> {self.max_replaced}): {str(error).splitlines()[0][:160]}; find why runners die "
                "(memory, a lost node) or raise actor.max_replaced"
            )
        try:
            self.ray.kill(slot.handle, no_restart=True)
        except Exception:  # already gone
            pass
        self.log(
            f"runner {index} died ({type(error).__name__}); its trajectory is dropped and a new runner takes "
            f"its place ({self.replaced} replaced)"
        )
        slot.pending.clear()
        slot.next = update
        self._spawn(index)
        self._submit()

    def faults(self) -> tuple[int, int]:
        """Runners replaced and trajectories dropped since the last call."""
        last, self._reported = self._reported, (self.replaced, self.dropped)
        return self.replaced - last[0], self.dropped - last[1]

    def close(self, timeout: float = 5.0) -> list[str]:
        """Kill every runner and remove the placement group (and stop the local runtime this run started)."""
        ray = self.ray
        closing = []
        for slot in self.slots:
            if slot.handle is not None:
                closing.append(slot.handle.close.remote())
        if closing:
            try:
                ray.wait(closing, num_returns=len(closing), timeout=timeout)
            except Exception:  # a runner already dead
                pass
        for slot in self.slots:
            if slot.handle is not None:
                try:
                    ray.kill(slot.handle, no_restart=True)
                except Exception:
                    pass
        if self.pg is not None:
            from ray.util.placement_group import remove_placement_group

            try:
                remove_placement_group(self.pg)
            except Exception:
                pass
        if self.started:
            ray.shutdown()
        return []


class _Named(Exception):
    """An error re-made on the learner's side under its original type's name."""

    def __init__(self, type_name: str, text: str):
        super().__init__(text)
        self.type_name = type_name
