"""The compiled programs of a run: the members' carried state (:class:`Carry`),
their ``init``, ``advance`` and ``close`` programs (:func:`build`), compiled for the run's layout
with its memory checks (:func:`compile_programs`), a checkpoint's carry
(:func:`load_carry`) and the held-out evaluation of the final policies
(:func:`heldout`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from flax import struct

from jaxrl import perf
from jaxrl.envs import with_params
from jaxrl.run import memory, parallel
from jaxrl.run.checkpoint import Checkpointer, Restored
from jaxrl.run.logs import format_count
from jaxrl.run.parallel import to_host
from jaxrl.trainer import pbt as pbt_lib
from jaxrl.trainer.loop import ChunkMetrics, make_heldout, make_segments, traced_once

__all__ = [
    "Carry",
    "Program",
    "Compiled",
    "segment_length",
    "build",
    "compile_programs",
    "load_carry",
    "fallback_note",
    "heldout",
]


@struct.dataclass
class Carry:
    """What the compiled program carries from chunk to chunk (and checkpoints)."""

    states: Any  # loop.TrainState, leaves [M, ...]
    hparams: Any  # leaves [M]
    pbt_key: Any  # typed PRNG key []


class Program(NamedTuple):
    """A run's programs before compiling: ``init(keys, hparams) -> Carry``,
    ``advance(carry, n) -> (carry, UpdateMetrics [M, segment])`` (``n ≤ segment``
    updates), ``close(carry) -> (carry, EvalMetrics, sets, PBTStep | None)`` (the
    chunk's evaluation and PBT step), the carry's abstract shape and its layout
    (one sharding per leaf). The host runs a chunk as ``advance`` calls of at
    most ``segment`` updates, then ``close``: it can report between them, and
    every program stays in the persistent compilation cache."""

    keys: Any  # typed PRNG keys [M]
    init: Callable[..., Any]
    advance: Callable[..., Any]
    close: Callable[..., Any]
    abstract: Any
    shardings: Any
    segment: int


def _is_key(x: Any) -> bool:
    import jax

    return jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def segment_length(chunk_updates: int) -> int:
    """Updates per ``advance`` call: at most 8 calls per chunk (each call, and
    the live line's read between calls, takes host time that a small CPU's
    cores would otherwise spend training)."""
    return -(-chunk_updates // 8)


def build(spec: Any) -> Program:
    """The :class:`Program` of ``spec`` (a :class:`jaxrl.run.spec.RunSpec`)."""
    import jax
    import numpy as np

    config, trainer = spec.config, spec.trainer
    use_pbt = config.pbt.population > 0
    keys = jax.vmap(jax.random.key)(np.asarray(spec.members.seeds, np.uint32))
    segment = segment_length(trainer.chunk_updates)
    init_b, advance_b, close_b = make_segments(trainer, segment, hparams_batched=True)

    def init(keys, hparams):
        return Carry(init_b(keys, hparams), hparams, jax.random.key(config.pbt.seed))

    def advance(carry: Carry, n):
        states, updates = advance_b(carry.states, carry.hparams, n)
        return carry.replace(states=states), updates

    def close(carry: Carry):
        states, eval_metrics, sets = close_b(carry.states)
        if not use_pbt:
            return carry.replace(states=states), eval_metrics, sets, None
        pbt_key, key = jax.random.split(carry.pbt_key)
        ranked = sets[config.pbt.fitness] if config.pbt.fitness else eval_metrics
        fitness = ranked.returns.mean(axis=-1)
        algorithm = spec.algorithm
        new_states, new_hparams, pbt_step = pbt_lib.exploit_explore(
            states, carry.hparams, fitness, key, config.pbt, algorithm.pbt_bounds, algorithm.own_fields
        )
        last = states.update[0] >= trainer.num_updates  # no PBT step after the final evaluation

        def pick(new, old):  # keys are never copied, so they pass through untouched
            return jax.tree.map(lambda a, b: a if _is_key(a) else jax.lax.select(last, b, a), new, old)

        new_states = pick(new_states, states)
        new_hparams = pick(new_hparams, carry.hparams)
        pbt_step = pbt_step._replace(parents=jax.numpy.where(last, -1, pbt_step.parents))
        return Carry(new_states, new_hparams, pbt_key), eval_metrics, sets, pbt_step

    # one trace of init: the carry's shape, and the init program (its replay)
    init_once, abstract = traced_once(init, keys, spec.members.hparams)
    shardings = parallel.carry_shardings(spec.layout, abstract, spec.algorithm.env_fields)
    return Program(keys, init_once, advance, close, abstract, shardings, segment)


class Compiled(NamedTuple):
    init: Any  # None when the carry comes from a checkpoint
    advance: Any
    close: Any
    segment: int
    seconds: float

    def chunk(self, carry: Carry, chunk_updates: int, report: Callable[[int, Any], None] | None = None) -> tuple:
        """One chunk: ``(carry, ChunkMetrics on the host, PBTStep | None on the host)``;
        ``report(updates_done, loop)`` after each segment, ``loop`` the segment's
        :class:`~jaxrl.core.contract.LoopMetrics` (host arrays ``[M, n]``)."""
        import jax
        import numpy as np

        def loop_of(part: tuple) -> Any:  # only what the live line reads crosses to the host
            updates, n = part
            return jax.tree.map(lambda x: x[:, :n], jax.device_get(updates.loop))

        parts = []
        for start in range(0, chunk_updates, self.segment):
            n = min(self.segment, chunk_updates - start)
            carry, updates = self.advance(carry, np.int32(n))
            if report is not None and parts:  # the previous segment, while this one runs
                report(start, loop_of(parts[-1]))
            parts.append((updates, n))
        if report is not None:
            report(chunk_updates, loop_of(parts[-1]))
        carry, eval_metrics, sets, pbt_step = self.close(carry)
        parts, eval_metrics, sets, pbt_step = jax.device_get((parts, eval_metrics, sets, pbt_step))
        pieces = [jax.tree.map(lambda x, n=n: np.asarray(x)[:, :n], u) for u, n in parts]
        updates = jax.tree.map(lambda *xs: np.concatenate(xs, axis=1), *pieces)
        return carry, ChunkMetrics(updates, eval_metrics, sets), pbt_step


def compile_programs(
    spec: Any, program: Program, with_init: bool, fits: Callable[[Callable[[], None]], None]
) -> Compiled:
    """``program`` compiled for the run's layout and backend options; each
    compiled program's memory checked by ``fits(check)`` (which cleans up
    before re-raising the check's ConfigError)."""
    import time

    import jax
    import numpy as np

    t0 = time.perf_counter()
    n = jax.ShapeDtypeStruct((), np.int32)
    if spec.layout is None:
        init_jit = jax.jit(program.init)
        advance_jit = jax.jit(program.advance, donate_argnums=0)
        close_jit = jax.jit(program.close, donate_argnums=0)
    else:
        rep = parallel.replicated(spec.layout)
        init_jit = jax.jit(program.init, out_shardings=program.shardings)
        advance_jit = jax.jit(
            program.advance,
            donate_argnums=0,
            in_shardings=(program.shardings, rep),
            out_shardings=(program.shardings, rep),
        )
        close_jit = jax.jit(
            program.close,
            donate_argnums=0,
            in_shardings=(program.shardings,),
            out_shardings=(program.shardings, rep, rep, rep),
        )
    options = perf.compile_options(perf.of(spec.config), spec.process.opt_level)
    init_c = init_jit.lower(program.keys, spec.members.hparams).compile(options) if with_init else None
    advance_c = advance_jit.lower(program.abstract, n).compile(options)
    close_c = close_jit.lower(program.abstract).compile(options)
    seconds = time.perf_counter() - t0
    fix = memory.sizes_fix(spec.config, spec.num_members)
    named = (("the init program", init_c), ("the training program", advance_c), ("the evaluation program", close_c))
    for name, compiled in named:
        if compiled is not None:
            fits(
                lambda compiled=compiled, name=name: memory.check(
                    memory.program_bytes(compiled), spec.layout, name, fix
                )
            )
    return Compiled(init_c, advance_c, close_c, program.segment, seconds)


def load_carry(spec: Any, chunk: int | None = None, field: str = "resume", layout: Any = None) -> Restored:
    """The checkpointed :class:`Carry` of ``spec.run_dir`` (the newest intact one,
    or ``chunk``) as a :class:`jaxrl.run.checkpoint.Restored`, laid out as
    ``layout`` (a :class:`jaxrl.run.parallel.Plan`; ``None``: this process's first
    device), whatever layout wrote it."""
    program = build(spec)
    shardings = parallel.carry_shardings(layout, program.abstract, spec.algorithm.env_fields)
    return Checkpointer(spec.run_dir, keep=spec.config.keep).restore(program.abstract, shardings, chunk, field=field)


def fallback_note(restored: Restored, trainer: Any) -> str | None:
    """One line when newer checkpoints than the restored one were unreadable:
    which ones, why, and how many env steps per member that loses."""
    if not restored.skipped:
        return None
    newest = max(s for s, _ in restored.skipped)
    lost = trainer.env_steps(newest * trainer.chunk_updates) - trainer.env_steps(restored.chunk * trainer.chunk_updates)
    why = "; ".join(f"checkpoint {s}: {r}" for s, r in restored.skipped)
    return (
        f"warning: newer checkpoints are unreadable ({why}); using checkpoint {restored.chunk} "
        f"({format_count(trainer.env_steps(restored.chunk * trainer.chunk_updates))} env steps per member, "
        f"{format_count(lost)} fewer)"
    )


def heldout(spec: Any, states: Any, log: Callable[[str], None]) -> dict[str, Any]:
    """The final policies evaluated under the training parameters and each of
    ``eval.perturb``'s settings, in one program: ``{"settings", "returns" [K, M]}``."""
    import time

    import jax
    import numpy as np

    env, trainer = spec.env, spec.trainer
    settings = list(spec.heldout)
    params = [env.default_params] + [with_params(env, **s) for s in settings]
    stacked = jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *params)
    t0 = time.perf_counter()
    options = perf.compile_options(perf.of(spec.config), spec.process.opt_level)
    result = jax.jit(make_heldout(trainer), compiler_options=options)(states, stacked)
    returns = np.asarray(to_host(result.returns), np.float64).mean(axis=-1)  # [K, M]
    log(
        f"held-out evaluation: {len(settings)} settings × {returns.shape[1]} members in {time.perf_counter() - t0:.1f} s"
    )
    return {"settings": [{}] + settings, "returns": returns}
