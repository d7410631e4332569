"""The records of ``metrics.jsonl``: one :class:`UpdateRecord` per update (or,
in sweeps, none) and one :class:`EvalRecord` per chunk, every per-member value a
list with ``None`` where it is not a number. The chunk loop makes them from the
compiled program's metrics; the logs, the summary, the plots and the report
read them — in memory, or back from the file with :func:`read`."""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from jaxrl.run.io import jsonable

__all__ = ["UpdateRecord", "EvalRecord", "update_records", "chunk_training_stats", "read", "from_json"]

Values = list  # one JSON value per member: float | None (or int)


@dataclass
class UpdateRecord:
    """One update of every member."""

    chunk: int
    update: int  # 1-based update count after it
    env_steps: int  # env steps per member after it (warm-up included)
    episode_return: Values  # mean return of the episodes that ended in it (None: none did)
    episode_length: Values
    episodes: Values  # episodes that ended in it
    metrics: dict[str, Values] = field(default_factory=dict)  # the algorithm's declared metrics

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "update",
            "chunk": self.chunk,
            "update": self.update,
            "env_steps": self.env_steps,
            "episode_return": self.episode_return,
            "episode_length": self.episode_length,
            "episodes": self.episodes,
            **self.metrics,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> UpdateRecord:
        fixed = {f.name for f in dataclasses.fields(cls)} - {"metrics"}
        return cls(
            **{k: data[k] for k in fixed}, metrics={k: v for k, v in data.items() if k not in fixed and k != "type"}
        )


@dataclass
class EvalRecord:
    """The deterministic evaluation at the end of a chunk, with the chunk's time
    and, where asked, the evaluation sets, the training statistics of the whole
    chunk (sweeps' strided records) and the PBT population's hyperparameters."""

    chunk: int
    update: int
    env_steps: int
    eval_return: Values  # mean over eval.episodes (None: a failed member)
    eval_return_std: Values
    eval_length: Values
    failed_at_update: Values  # first non-finite update (0: healthy)
    chunk_time_s: float
    env_steps_per_s: float
    eval_sets: dict[str, Values] | None = None  # eval.sets: each set's mean return
    training: dict[str, Values] | None = None  # episode_return, episode_length, episodes and metrics over the chunk
    hparams: dict[str, Values] | None = None  # PBT: each member's hyperparameters during the chunk
    parents: Values | None = None  # PBT: the member each slot copied after the chunk (−1: none)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "eval"}
        out.update({f: getattr(self, f) for f in _EVAL_FIXED})
        if self.eval_sets is not None:
            out["eval_sets"] = self.eval_sets
        out.update(self.training or {})
        if self.hparams is not None:
            out["hparams"] = self.hparams
            out["parents"] = self.parents
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EvalRecord:
        known = set(_EVAL_FIXED) | {"type", "eval_sets", "hparams", "parents"}
        training = {k: v for k, v in data.items() if k not in known}
        return cls(
            **{k: data[k] for k in _EVAL_FIXED},
            eval_sets=data.get("eval_sets"),
            training=training or None,
            hparams=data.get("hparams"),
            parents=data.get("parents"),
        )


_EVAL_FIXED = (
    "chunk",
    "update",
    "env_steps",
    "eval_return",
    "eval_return_std",
    "eval_length",
    "failed_at_update",
    "chunk_time_s",
    "env_steps_per_s",
)


def from_json(data: dict[str, Any]) -> UpdateRecord | EvalRecord:
    """A record of either kind from its JSON object."""
    return UpdateRecord.from_json(data) if data.get("type") == "update" else EvalRecord.from_json(data)


def read(path: str) -> list[UpdateRecord | EvalRecord]:
    """The records of a ``metrics.jsonl`` (a torn last line from a crash ends them)."""
    if not os.path.exists(path):
        return []
    out: list[UpdateRecord | EvalRecord] = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                out.append(from_json(json.loads(line)))
            except (json.JSONDecodeError, KeyError, TypeError):
                break
    return out


def update_records(
    metrics: Any, chunk: int, first_update: int, steps_per_update: int, offset: int = 0
) -> list[UpdateRecord]:
    """One record per update of a chunk's metrics (the algorithm's metrics
    NamedTuple, leaves ``[M, U]``)."""
    loop = metrics.loop
    episodes = np.asarray(loop.episodes)  # [M, U]
    with np.errstate(invalid="ignore", divide="ignore"):
        ep_return = np.where(episodes > 0, np.asarray(loop.episode_return_sum) / episodes, np.nan)
        ep_length = np.where(episodes > 0, np.asarray(loop.episode_length_sum) / episodes, np.nan)
    own = {name: np.asarray(value) for name, value in metrics._asdict().items() if name != "loop"}
    records = []
    for u in range(episodes.shape[1]):
        update = first_update + u + 1
        records.append(
            UpdateRecord(
                chunk=chunk,
                update=update,
                env_steps=offset + update * steps_per_update,
                episode_return=jsonable(ep_return[:, u]),
                episode_length=jsonable(ep_length[:, u]),
                episodes=jsonable(episodes[:, u]),
                metrics={name: jsonable(value[:, u]) for name, value in own.items()},
            )
        )
    return records


def chunk_training_stats(metrics: Any, names: tuple[str, ...]) -> dict[str, Values]:
    """Per-member training statistics of a whole chunk (for strided records):
    episode statistics over the chunk's completed episodes, and the mean over
    its updates of each metric in ``names`` (the algorithm's declared metrics)."""
    loop = metrics.loop
    episodes = np.asarray(loop.episodes).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = {
            "episode_return": np.where(
                episodes > 0, np.asarray(loop.episode_return_sum).sum(axis=1) / episodes, np.nan
            ),
            "episode_length": np.where(
                episodes > 0, np.asarray(loop.episode_length_sum).sum(axis=1) / episodes, np.nan
            ),
            "episodes": episodes,
        }
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a member whose every update failed: NaN
        for name in names:
            out[name] = np.nanmean(np.asarray(getattr(metrics, name), np.float64), axis=1)
    return {k: jsonable(v) for k, v in out.items()}
