"""The env backend contract and registry: how ``env=NAME`` finds an adapter.

A :class:`Backend` is a named adapter (gymnax, brax, a user's suite) that knows
its environment ids, resolves what a user typed to one of them, builds an
:class:`~jaxrl.envs.core.Env` from it, and says what kind of actions an id has
(so a config can be checked before anything compiles). ``NAME:ID`` picks the
backend explicitly (``brax:ant``, ``gymnax:CartPole-v1``); a bare ``ID`` goes to
the first backend that resolves it, in registration order.

>>> jaxrl.envs.register_backend(Backend(name="mysuite", names=..., resolve=..., make=..., actions=...))
>>> jaxrl.envs.make("mysuite:Maze-v0")    # then env=mysuite:Maze-v0 works in the CLI
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from jaxrl.envs.core import Env

__all__ = ["Backend", "backend_names", "get_backend", "lookup", "register_backend", "unregister_backend"]


@dataclass(frozen=True)
class Backend:
    """An env backend adapter.

    Attributes:
      name: the backend's name, also its explicit prefix (``NAME:ID``).
      names: ``() -> ids`` it lists in :func:`jaxrl.envs.names` (and suggests
        for misspellings); may be a subset of what it resolves.
      resolve: ``(text, explicit) -> canonical id | None``: what a user typed
        (without the prefix; ``explicit`` when they wrote it), case-insensitive
        as the backend likes. A canonical id must resolve to itself.
      make: ``(canonical id, **options) -> Env``; options are the config's
        ``env.backend`` and ``env.episode_length`` (``backend=``,
        ``episode_length=``), each backend taking the ones it uses.
      actions: ``canonical id -> "discrete" | "continuous" | None`` (None: not
        known without building it: the run checks the built env, before it writes anything).
      available: ``() -> None | (constraint, fix)``: why the backend cannot
        build envs here (an optional dependency missing), or None.
    """

    name: str
    names: Callable[[], Sequence[str]]
    resolve: Callable[[str, bool], str | None]
    make: Callable[..., Env]
    actions: Callable[[str], str | None]
    available: Callable[[], tuple[str, str] | None] = lambda: None


_BACKENDS: dict[str, Backend] = {}


def register_backend(backend: Backend, *, replace: bool = False) -> Backend:
    """Add ``backend`` (its ids then work everywhere an env name does: the CLI,
    sweeps, evaluate, export). A name already taken needs ``replace=True``."""
    if not isinstance(backend, Backend):
        raise TypeError(f"register_backend() takes a jaxrl.envs.Backend, not {type(backend).__name__}")
    if not backend.name or not backend.name.isidentifier():
        raise ValueError(f"a backend name must be an identifier, not {backend.name!r}")
    if backend.name in _BACKENDS and not replace and _BACKENDS[backend.name] is not backend:
        raise ValueError(f"env backend {backend.name!r} is registered already (pass replace=True)")
    _BACKENDS[backend.name] = backend
    return backend


def unregister_backend(name: str) -> None:
    """Remove the backend registered as ``name`` (KeyError if none)."""
    del _BACKENDS[name]


def backend_names() -> list[str]:
    """Registered backends, in resolution order."""
    return list(_BACKENDS)


def get_backend(name: str) -> Backend:
    """The backend registered as ``name`` (KeyError if none)."""
    return _BACKENDS[name]


def lookup(text: Any) -> tuple[Backend, str] | None:
    """``(backend, canonical id)`` for what a user typed, or None."""
    if not isinstance(text, str) or not text.strip():
        return None
    key = text.strip()
    prefix, sep, rest = key.partition(":")
    if sep and prefix.lower() in _BACKENDS:
        backend = _BACKENDS[prefix.lower()]
        canonical = backend.resolve(rest, True) if rest else None
        return (backend, canonical) if canonical is not None else None
    for backend in _BACKENDS.values():
        canonical = backend.resolve(key, False)
        if canonical is not None:
            return backend, canonical
    return None
