"""Per-field policies, declared once on the config dataclasses (STYLE #16).

A config field says what may be done with it in its own declaration, as
metadata that :func:`setting` and :func:`traced` attach; every list the host
needs is derived from those declarations, never kept beside them:

* **traced** — a float hyperparameter, passed to the compiled program as an
  argument (:class:`HParams`), so seeds, sweeps and PBT share one compile;
* **resumable** — may change when a run is resumed (how it is watched or laid
  out: ``progress``, ``logger``, ``devices``, …); such a field is not part of
  the checkpoint's config hash;
* **hashed** — part of the config hash that a checkpoint must match;
* **sweep** — empty, or why the key cannot be swept;
* **check** — a one-value range check (:class:`jaxrl.core.checks.Range`);
* **pbt** — the bounds ``(lo, hi, log)`` within which PBT may evolve the value.

A section field (``dist: DistConfig = setting(..., inherit=True, …)``) passes
its resume, hash and sweep rules on to the fields of its section.

>>> @dataclass(frozen=True)
... class MyConfig:
...     name: str = "my_algo"
...     num_steps: int = 32
...     lr: float = traced(3e-4, check=POSITIVE, pbt=(1e-5, 1e-1, True))  # Adam step size
>>> traced_names(MyConfig)
('lr',)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Policy",
    "HParams",
    "setting",
    "traced",
    "policy_of",
    "fields_with",
    "traced_names",
    "pbt_bounds",
    "walk",
]

_KEY = "jaxrl"


@dataclass(frozen=True)
class Policy:
    """What may be done with one config field."""

    traced: bool = False
    resumable: bool = False
    hashed: bool = True
    sweep: str = ""  # why the key cannot be swept ("": it can)
    check: Callable[[str, Any, Any], None] | None = None  # (key, value, default) -> None, raising ConfigError
    pbt: tuple[float, float, bool] | None = None  # (lo, hi, log)
    inherit: bool = False  # a section whose fields take this policy (unless they declare their own)

    @property
    def sweepable(self) -> bool:
        return not self.sweep


def setting(
    default: Any = dataclasses.MISSING,
    *,
    factory: Callable[[], Any] | Any = dataclasses.MISSING,
    resumable: bool = False,
    hashed: bool | None = None,
    sweep: str = "",
    check: Callable[[str, Any, Any], None] | None = None,
    inherit: bool = False,
) -> Any:
    """A static config field (``default``, or ``factory()`` for a mutable or
    section default) with its policy. A resumable field is never hashed; a
    field with ``hashed=False`` that is not resumable (where a run lives) is
    hashed as empty. ``inherit``: a section whose fields take this policy."""
    policy = Policy(
        resumable=resumable,
        hashed=False if resumable else (True if hashed is None else hashed),
        sweep=sweep,
        check=check,
        inherit=inherit,
    )
    return dataclasses.field(default=default, default_factory=factory, metadata={_KEY: policy})


def traced(
    default: float,
    *,
    check: Callable[[str, Any, Any], None] | None = None,
    pbt: tuple[float, float, bool] | None = None,
) -> Any:
    """A float hyperparameter of an algorithm config: traced (one compile for every
    value), sweepable, range-checked by ``check`` and evolvable by PBT within
    ``pbt = (lo, hi, log)`` when given."""
    if pbt is not None and not (len(pbt) == 3 and pbt[0] < pbt[1]):
        raise TypeError(f"pbt bounds must be (lo, hi, log) with lo < hi, not {pbt!r}")
    return dataclasses.field(default=float(default), metadata={_KEY: Policy(traced=True, check=check, pbt=pbt)})


def policy_of(f: dataclasses.Field, section: Policy | None = None) -> Policy:
    """The field's own policy; in a section that hands its policy on
    (``inherit``), with the section's resume, hash and sweep rules."""
    own = f.metadata.get(_KEY) or Policy()
    if section is None or not section.inherit:
        return own
    return dataclasses.replace(
        own, resumable=section.resumable, hashed=section.hashed, sweep=own.sweep or section.sweep, inherit=False
    )


def walk(cls: type, prefix: str = "", section: Policy | None = None) -> Iterator[tuple[str, dataclasses.Field, Policy]]:
    """``(dotted key, field, policy)`` of every leaf field of the dataclass
    ``cls``; a section (a field whose default factory is a dataclass) is
    expanded into its fields, which take its policy when it hands it on."""
    for f in dataclasses.fields(cls):
        policy = policy_of(f, section)
        factory = f.default_factory
        if isinstance(factory, type) and dataclasses.is_dataclass(factory):
            yield from walk(factory, f"{prefix}{f.name}.", policy)
        else:
            yield f"{prefix}{f.name}", f, policy


def fields_with(cls: type, test: Callable[[Policy], bool]) -> tuple[str, ...]:
    """The dotted keys of ``cls`` whose policy passes ``test``."""
    return tuple(key for key, _, policy in walk(cls) if test(policy))


def traced_names(cls: type) -> tuple[str, ...]:
    """The traced fields of an algorithm config class, in declaration order."""
    return tuple(f.name for f in dataclasses.fields(cls) if policy_of(f).traced)


def pbt_bounds(cls: type) -> dict[str, tuple[float, float, bool]]:
    """``{name: (lo, hi, log)}`` of the fields PBT may evolve."""
    return {f.name: policy_of(f).pbt for f in dataclasses.fields(cls) if policy_of(f).pbt is not None}


class HParams:
    """The traced hyperparameters of one algorithm config, as a pytree.

    ``hp.lr``, ``hp.gamma``, … are float32 arrays (scalars for one member; a
    leading axis to vmap over members). The leaves are the config's traced
    fields in declaration order, with attribute key paths (``.lr``), so
    checkpoints name them. ``HParams.from_config(algo)`` reads a config's
    values; ``replace(**changes)`` returns a copy; ``to_dict()`` a plain dict.
    """

    __slots__ = ("_names", "_values")

    def __init__(self, names: tuple[str, ...], values: tuple[Any, ...]):
        object.__setattr__(self, "_names", tuple(names))
        object.__setattr__(self, "_values", tuple(values))

    @classmethod
    def from_config(cls, algo: Any) -> HParams:
        import jax.numpy as jnp

        names = traced_names(type(algo))
        return cls(names, tuple(jnp.asarray(getattr(algo, n), jnp.float32) for n in names))

    @property
    def names(self) -> tuple[str, ...]:
        return self._names

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._values[self._names.index(name)]
        except ValueError:
            raise AttributeError(f"no traced hyperparameter {name!r} (traced: {', '.join(self._names)})") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("HParams is immutable; use replace()")

    def replace(self, **changes: Any) -> HParams:
        unknown = set(changes) - set(self._names)
        if unknown:
            raise AttributeError(f"no traced hyperparameters {sorted(unknown)} (traced: {', '.join(self._names)})")
        return HParams(self._names, tuple(changes.get(n, v) for n, v in zip(self._names, self._values, strict=True)))

    def to_dict(self) -> dict[str, Any]:
        return dict(zip(self._names, self._values, strict=True))

    def __repr__(self) -> str:
        return "HParams(" + ", ".join(f"{n}={v!r}" for n, v in zip(self._names, self._values, strict=True)) + ")"

    def tree_flatten_with_keys(self) -> tuple[list[tuple[Any, Any]], tuple[str, ...]]:
        from jax.tree_util import GetAttrKey

        return [(GetAttrKey(n), v) for n, v in zip(self._names, self._values, strict=True)], self._names

    def tree_flatten(self) -> tuple[tuple[Any, ...], tuple[str, ...]]:
        return self._values, self._names

    @classmethod
    def tree_unflatten(cls, names: tuple[str, ...], values: Any) -> HParams:
        return cls(names, tuple(values))


def _register() -> None:
    import jax

    jax.tree_util.register_pytree_with_keys(
        HParams, HParams.tree_flatten_with_keys, HParams.tree_unflatten, HParams.tree_flatten
    )


_register()
