"""The compiled programs of a run: the members' carried state (:class:`Carry`),
their ``init`` and chunk programs (:func:`build`), compiled for the run's layout
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
from jaxrl.trainer.loop import make_batched, make_heldout

__all__ = ["Carry", "Program", "build", "compile_programs", "load_carry", "fallback_note", "heldout"]


@struct.dataclass
class Carry:
    """What the compiled program carries from chunk to chunk (and checkpoints)."""

    states: Any  # loop.TrainState, leaves [M, ...]
    hparams: Any  # leaves [M]
    pbt_key: Any  # typed PRNG key []


class Program(NamedTuple):
    """A run's programs before compiling: ``init(keys, hparams) -> Carry`` and
    ``step(carry) -> (carry, ChunkMetrics, PBTStep | None)``, the carry's
    abstract shape and its layout (one sharding per leaf)."""

    keys: Any  # typed PRNG keys [M]
    init: Callable[..., Any]
    step: Callable[..., Any]
    abstract: Any
    shardings: Any


def _is_key(x: Any) -> bool:
    import jax

    return jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def build(spec: Any, progress: Any = None) -> Program:
    """The :class:`Program` of ``spec`` (a :class:`jaxrl.run.spec.RunSpec`);
    ``progress``: a host function the chunk program feeds every few updates."""
    import jax
    import numpy as np

    config, trainer = spec.config, spec.trainer
    use_pbt = config.pbt.population > 0
    keys = jax.vmap(jax.random.key)(np.asarray(spec.members.seeds, np.uint32))
    # at most ~32 host round trips per chunk (each costs ≈ 2 ms on a small CPU)
    every = -(-trainer.chunk_updates // 32)
    replicated = parallel.replicated(spec.layout) if progress is not None and spec.layout is not None else None
    init_b, chunk_b = make_batched(
        trainer, hparams_batched=True, progress=progress, progress_every=every, progress_sharding=replicated
    )

    def init(keys, hparams):
        return Carry(init_b(keys, hparams), hparams, jax.random.key(config.pbt.seed))

    def step(carry: Carry):
        states, metrics = chunk_b(carry.states, carry.hparams)
        if not use_pbt:
            return carry.replace(states=states), metrics, None
        pbt_key, key = jax.random.split(carry.pbt_key)
        ranked = metrics.sets[config.pbt.fitness] if config.pbt.fitness else metrics.eval
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
        return Carry(new_states, new_hparams, pbt_key), metrics, pbt_step

    abstract = jax.eval_shape(init, keys, spec.members.hparams)
    shardings = parallel.carry_shardings(spec.layout, abstract, spec.algorithm.env_fields)
    return Program(keys, init, step, abstract, shardings)


class Compiled(NamedTuple):
    init: Any  # None when the carry comes from a checkpoint
    step: Any
    seconds: float


def compile_programs(
    spec: Any, program: Program, with_init: bool, fits: Callable[[Callable[[], None]], None]
) -> Compiled:
    """``program`` compiled for the run's layout and backend options; each
    compiled program's memory checked by ``fits(check)`` (which cleans up
    before re-raising the check's ConfigError)."""
    import time

    import jax

    t0 = time.perf_counter()
    if spec.layout is None:
        init_jit, step_jit = jax.jit(program.init), jax.jit(program.step, donate_argnums=0)
    else:
        rep = parallel.replicated(spec.layout)
        init_jit = jax.jit(program.init, out_shardings=program.shardings)
        step_jit = jax.jit(
            program.step,
            donate_argnums=0,
            in_shardings=(program.shardings,),
            out_shardings=(program.shardings, rep, rep),
        )
    options = perf.compile_options(perf.of(spec.config), spec.process.opt_level)
    init_c = init_jit.lower(program.keys, spec.members.hparams).compile(options) if with_init else None
    step_c = step_jit.lower(program.abstract).compile(options)
    seconds = time.perf_counter() - t0
    fix = memory.sizes_fix(spec.config, spec.num_members)
    for name, compiled in (("the init program", init_c), ("the training program", step_c)):
        if compiled is not None:
            fits(lambda: memory.check(memory.program_bytes(compiled), spec.layout, name, fix))
    return Compiled(init_c, step_c, seconds)


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
