"""Named evaluation sets (``eval.sets``): the worlds a policy is evaluated in at
every evaluation point.

``parse_sets("train; nominal; test: length=1.5,2 gravity=15; wide:
length=uniform(0.25,2)", env)`` reads a specification: sets separated by
``;``, each either a built-in name or ``name: terms``.

- ``train``: the training distribution — the evaluation every run already makes
  (for a randomized env, under its draws);
- ``nominal``: the env's own parameters (``env.params`` applied), never drawn;
- ``name: terms``: ``param=v1,v2,…`` terms span a grid (every combination is
  evaluated with ``eval.episodes`` episodes) and ``param=uniform(lo,hi)`` /
  ``loguniform`` / ``choice`` terms are drawn per episode (as ``env.randomize``
  does); parameters a set does not name keep their nominal values.

A set's score for a member is the mean return over all its episodes.
"""

from __future__ import annotations

from dataclasses import dataclass

from jaxrl.core.errors import ConfigError
from jaxrl.envs.core import Env
from jaxrl.envs.params import grid, param_names, parse_grid_term
from jaxrl.envs.randomize import Dist, is_dist_term, parse_dist_term

__all__ = ["BUILTIN", "EvalSet", "parse_sets"]

FIELD = "eval.sets"
BUILTIN = ("train", "nominal")
EXAMPLE = 'eval.sets="train; nominal; test: length=1.5,2"'


@dataclass(frozen=True)
class EvalSet:
    """One named evaluation set: ``kind`` is ``train``, ``nominal`` or
    ``custom``; a custom set's ``points`` are its grid (``({},)`` without grid
    terms) and its ``dists`` the parameters drawn per episode."""

    name: str
    kind: str
    points: tuple[dict[str, float], ...] = ({},)
    dists: tuple[Dist, ...] = ()

    @property
    def episodes_factor(self) -> int:
        """Evaluation episodes per ``eval.episodes``: one batch per grid point."""
        return len(self.points)

    def describe(self) -> str:
        """The set as one would write it."""
        if self.kind != "custom":
            return self.name
        axes: dict[str, list[float]] = {}
        for point in self.points:
            for k, v in point.items():
                axes.setdefault(k, [])
                if v not in axes[k]:
                    axes[k].append(v)
        terms = [f"{k}={','.join(f'{v:g}' for v in vs)}" for k, vs in axes.items()]
        terms += [f"{d.name}={d.kind}({','.join(f'{v:g}' for v in d.values)})" for d in self.dists]
        return f"{self.name}: {' '.join(terms)}"


def parse_sets(text: str, env: Env) -> tuple[EvalSet, ...]:
    """``eval.sets``'s text → its :class:`EvalSet` s, in the order given.

    Raises :class:`ConfigError` (field ``eval.sets``) for a set name used twice,
    a name that is not an identifier, an unknown built-in, a custom set without
    terms, a built-in given terms, a parameter named twice in one set, or a bad
    term (unknown parameter, empty range, non-numbers)."""
    text = (text or "").strip()
    if not text:
        return ()
    sets: list[EvalSet] = []
    seen: set[str] = set()
    names: list[str] | None = None
    for entry in (e.strip() for e in text.split(";")):
        if not entry:
            continue
        name, colon, body = entry.partition(":")
        name, body = name.strip(), body.strip()
        if not name.isidentifier():
            raise ConfigError(FIELD, text, f"{name!r} is not a set name (letters, digits, _)", f"write e.g. {EXAMPLE}")
        if name in seen:
            raise ConfigError(FIELD, text, f"the set name {name!r} is used twice", "give every set its own name")
        seen.add(name)
        if name in BUILTIN:
            if body:
                raise ConfigError(
                    FIELD,
                    text,
                    f"{name!r} is a built-in set and takes no terms",
                    f"name your set otherwise, e.g. test: {body}",
                )
            sets.append(EvalSet(name, name))
            continue
        if not colon or not body:
            raise ConfigError(
                FIELD,
                text,
                f"{name!r} is not a built-in set ({', '.join(BUILTIN)}) and gives no terms",
                f"write {name}: PARAM=V1,V2 (e.g. {EXAMPLE})",
            )
        names = param_names(env) if names is None else names
        axes: dict[str, list[float]] = {}
        dists: list[Dist] = []
        for part in body.split():
            term = parse_dist_term(part, env, FIELD, text, names) if is_dist_term(part) else None
            key = term.name if term is not None else part.partition("=")[0]
            if key in axes or any(d.name == key for d in dists):
                raise ConfigError(
                    FIELD, text, f"set {name!r} names {key!r} twice", f"give {key} one list or distribution"
                )
            if term is not None:
                dists.append(term)
            else:
                key, values = parse_grid_term(part, env, FIELD, text, names)
                axes[key] = values
        sets.append(EvalSet(name, "custom", tuple(grid(axes)), tuple(dists)))
    if not sets:
        raise ConfigError(FIELD, text, "names no set", f"write e.g. {EXAMPLE}")
    return tuple(sets)
