"""Backend-specific speed code behind one switch: ``perf=auto|on|off``.

jaxrl's XLA:CPU kernels — the Dense layers' custom matrix-product gradient and
small-product ``vmap`` rule (:func:`jaxrl.perf.dense.dense_dot_general`), the
one-draw orthogonal initialization (:func:`jaxrl.perf.dense.init_params`), the
sort-free minibatch shuffle (:func:`jaxrl.perf.shuffle.permutation`), the
dtype-packed rollout scans (:func:`jaxrl.perf.packing.scan`) and LLVM ``-O1``
(:func:`jaxrl.perf.platform.compiler_options`) — were each measured faster on
XLA:CPU only. ``perf=on`` selects them, ``perf=off`` the plain path: plain
``flax.linen.Dense`` (so ``jax.jvp`` and ``jax.jacfwd`` work through the
networks), ``module.init`` for the parameters, ``jax.random.permutation``,
``jax.lax.scan`` and XLA's own compile options. ``auto`` (the default) is on
for the CPU backend and off elsewhere, until the kernels are measured there.
They all live in this package (with the process settings of
:mod:`jaxrl.perf.platform`); the rest of jaxrl reaches them only through the
functions below and the networks' ``perf`` field.

Both paths compute the same functions: the networks, the optimizer and the
scans agree to float tolerance, and only the draws differ (the initial
weights and the minibatch order come from other, equally distributed random
numbers), so a run's numbers depend on the setting.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jaxrl.perf.platform import compiler_options

if TYPE_CHECKING:  # jax loads on first use, so that the CLI configures the process first
    import jax

__all__ = ["MODES", "resolve", "of", "scan", "permutation", "compile_options"]

MODES = ("auto", "on", "off")


def resolve(mode: str, backend: str | None = None) -> bool:
    """Whether ``perf=mode`` selects jaxrl's XLA:CPU kernels on ``backend``
    (default: jax's default backend)."""
    if mode not in MODES:
        raise ValueError(f"perf must be one of {', '.join(MODES)}, not {mode!r}")
    if mode != "auto":
        return mode == "on"
    if backend is None:
        import jax

        backend = jax.default_backend()
    return backend == "cpu"


def of(config: Any) -> bool:
    """:func:`resolve` of a run's ``config.perf``."""
    return resolve(config.perf)


def scan(on: bool) -> Callable[..., tuple[Any, Any]]:
    """``jax.lax.scan``'s signature: :func:`jaxrl.perf.packing.scan` when ``on``."""
    import jax

    from jaxrl.perf import packing

    return packing.scan if on else jax.lax.scan


def permutation(on: bool, key: jax.Array, n: int) -> jax.Array:
    """A uniformly random permutation of ``range(n)`` ``[n]`` int32:
    :func:`jaxrl.perf.shuffle.permutation` when ``on``, else ``jax.random.permutation``."""
    import jax

    from jaxrl.perf import shuffle

    if on:
        return shuffle.permutation(key, n)
    return jax.random.permutation(key, n).astype("int32")


def compile_options(on: bool, level: int | None = 1) -> dict[str, Any] | None:
    """Compile options for jaxrl's programs: LLVM ``-O<level>`` on XLA:CPU when
    ``on`` (:func:`jaxrl.perf.platform.compiler_options`), XLA's own otherwise."""
    return compiler_options(level) if on else None
