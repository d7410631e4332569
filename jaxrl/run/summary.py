"""What a finished run (or sweep group) reports, from its records: the
summary (``summary.json``: per configuration the final deterministic returns
and their statistics, held-out settings, evaluation sets and their
generalization gaps, the PBT lineage), the text tables the CLI prints and the
``curves.png`` plot."""

from __future__ import annotations

import os
from typing import Any, NamedTuple

import numpy as np

from jaxrl.core.version import __version__
from jaxrl.run import stats
from jaxrl.run.records import EvalRecord, UpdateRecord
from jaxrl.trainer.pbt import lineage

__all__ = [
    "Times",
    "summarize",
    "flat_summary",
    "set_blocks",
    "sets_table",
    "heldout_table",
    "pbt_summary",
    "pbt_text",
    "plot_run",
]


class Times(NamedTuple):
    compile_s: float
    train_s: float  # across every launch of the run (resumes included)
    wall_s: float  # this launch


def _setting_label(setting: dict[str, float]) -> str:
    return " ".join(f"{k}={v:g}" for k, v in setting.items()) or "training setting"


def summarize(spec: Any, records: list[Any], times: Times, heldout: dict[str, Any] | None) -> dict[str, Any]:
    """The run's summary from its records: per configuration, the final
    deterministic returns of its members and their statistics (failed members
    excluded from the statistics and counted as unsolved)."""
    import jax

    members, trainer, env = spec.members, spec.trainer, spec.env
    evals = [r for r in records if isinstance(r, EvalRecord)]
    last = evals[-1]
    final = [None if v is None else float(v) for v in last.eval_return]
    total, train_s = trainer.total_env_steps, times.train_s
    summary: dict[str, Any] = {
        "env": env.name,
        "algo": spec.config.algo.name,
        "total_timesteps": total,
        "solved_threshold": env.solved_return,
        "eval_episodes": spec.config.eval.episodes,
        "configs": [_config_block(spec, c, last, final) for c in range(len(members.labels))],
        "compile_time_s": times.compile_s,
        "train_time_s": train_s,
        "wall_time_s": times.wall_s,
        "env_steps_per_s": total * len(members) / train_s if train_s > 0 else None,
        "num_updates": trainer.num_updates,
        "num_chunks": trainer.num_chunks,
        "members": len(members),
        "run_dir": spec.run_dir,
        "jaxrl_version": __version__,
        "jax_version": jax.__version__,
        "backend": jax.default_backend(),
    }
    if heldout is not None:
        summary["heldout"] = _heldout_rows(spec, heldout, final)
    if spec.config.pbt.population:
        ranked = spec.config.pbt.fitness
        values = last.eval_sets[ranked] if ranked else final
        scores = [None if f is None else v for v, f in zip(values, final, strict=True)]
        summary["pbt"] = pbt_summary(evals, scores, spec.config.pbt.hparams, ranked)
    return summary


def _config_block(spec: Any, c: int, last: EvalRecord, final: list[float | None]) -> dict[str, Any]:
    """Configuration ``c``'s block: its members' final returns, their
    statistics, its evaluation sets and its failed seeds."""
    job, solved = spec.members, spec.env.solved_return
    failed_at = last.failed_at_update or [0] * len(job.seeds)
    members = [i for i, ci in enumerate(job.config_index) if ci == c]
    values = [final[i] for i in members]
    alive = np.asarray([v for v in values if v is not None], np.float64)
    if alive.size:
        block = stats.summarize(alive, solved)
    else:
        block = {k: None for k in ("mean", "median", "iqm", "ci95", "std", "min", "max", "solved_fraction")}
    if solved is not None:
        block["solved_fraction"] = float(np.sum(alive >= solved)) / len(members)
    if last.eval_sets is not None:
        block.update(set_blocks(last.eval_sets, final, members, solved))
    return {
        "label": job.labels[c],
        "hparams": {k: float(np.asarray(v)[members[0]]) for k, v in job.hparams.to_dict().items()},
        "seeds": [job.seeds[i] for i in members],
        "final_eval_return": values,
        **block,
        "failed_seeds": [
            {"seed": job.seeds[i], "update": int(failed_at[i]), "env_steps": spec.trainer.env_steps(int(failed_at[i]))}
            for i in members
            if failed_at[i]
        ],
    }


def _heldout_rows(spec: Any, heldout: dict[str, Any], final: list[float | None]) -> list[dict[str, Any]]:
    """Per held-out setting (the training setting first), each configuration's statistics."""
    job, solved = spec.members, spec.env.solved_return
    rows = []
    for k, setting in enumerate(heldout["settings"]):
        per_config = []
        for c, label in enumerate(job.labels):
            members = [i for i, ci in enumerate(job.config_index) if ci == c and final[i] is not None]
            values = heldout["returns"][k, members]
            block = stats.summarize(values, solved) if len(members) else {}
            per_config.append({"label": label, "returns": values.tolist(), **block})
        rows.append({"setting": setting, "label": _setting_label(setting), "configs": per_config})
    return rows


def set_blocks(
    sets: dict[str, list[float | None]], final: list[float | None], members: list[int], solved: float | None
) -> dict[str, Any]:
    """``{"sets": {name: statistics}, "generalization_gap": {name: {gap, ci95}}}``
    of one configuration's members: the final evaluation of every set, and each
    set's IQM minus the training distribution's (the run's own evaluation) with
    a paired bootstrap CI over seeds (failed members left out)."""

    live = [i for i in members if final[i] is not None]
    train = np.asarray([final[i] for i in live], np.float64)
    blocks: dict[str, Any] = {}
    gaps: dict[str, Any] = {}
    for name, values in sets.items():
        x = np.asarray([values[i] for i in live], np.float64)
        blocks[name] = {"returns": x.tolist(), **(stats.summarize(x, solved) if x.size else {})}
        if name != "train" and x.size:
            gaps[name] = stats.paired_difference(x, train)
    return {"sets": blocks, "generalization_gap": gaps}


def sets_table(summary: dict[str, Any]) -> str:
    """Text table of the evaluation sets: per set (and configuration) IQM
    [95% CI], mean, solved fraction and the gap to the training distribution."""
    configs = [c for c in summary.get("configs") or [summary] if c.get("sets")]
    if not configs:
        return ""
    multi = len(configs) > 1
    solved = summary.get("solved_threshold") is not None
    lines = ["evaluation sets (final policies, deterministic; gap: set IQM − train IQM, paired bootstrap over seeds):"]
    header = (
        f"  {'set':<12}" + (f" {'configuration':<28}" if multi else "") + f" {'IQM':>9}  {'95% CI':>19} {'mean':>9}"
    )
    header += ("  solved" if solved else "") + f"  {'gap':>9}  {'95% CI':>19}"
    lines.append(header)
    names = list(configs[0]["sets"])
    for name in names:
        for config in configs:
            block = config["sets"].get(name) or {}
            if block.get("iqm") is None:
                continue
            lo, hi = block["ci95"]
            line = f"  {name:<12}" + (f" {config.get('label', ''):<28}" if multi else "")
            line += f" {block['iqm']:>9.2f}  [{lo:>8.2f}, {hi:>8.2f}] {block['mean']:>9.2f}"
            if solved:
                line += f"  {block['solved_fraction'] * 100:5.0f}%"
            gap = config.get("generalization_gap", {}).get(name)
            if gap is not None:
                glo, ghi = gap["ci95"]
                line += f"  {gap['gap']:>+9.2f}  [{glo:>+8.2f}, {ghi:>+8.2f}]"
            lines.append(line)
    return "\n".join(lines)


def pbt_summary(
    evals: list[EvalRecord], final: list[float | None], evolved: tuple[str, ...], fitness: str = ""
) -> dict[str, Any]:
    """The best member by ``final`` (its fitness: the run's evaluation, or the
    ``pbt.fitness`` set's) and its lineage's hyperparameters chunk by chunk."""

    scores = np.asarray([-np.inf if v is None else v for v in final])
    best = int(np.argmax(scores))
    parents = [list(map(int, r.parents)) for r in evals[:-1]]
    slots = lineage(parents, best)
    trajectory = []
    for r, slot in zip(evals, slots, strict=True):
        trajectory.append(
            {
                "chunk": r.chunk,
                "env_steps": r.env_steps,
                "slot": slot,
                "eval_return": r.eval_return[slot],
                **({"fitness": r.eval_sets[fitness][slot]} if fitness else {}),
                "hparams": {k: r.hparams[k][slot] for k in evolved},
            }
        )
    replaced = sum(int(np.sum(np.asarray(p) >= 0)) for p in parents)
    return {
        "best_member": best,
        "best_final_return": final[best],
        "fitness": fitness or "eval",
        "copies": replaced,
        "best_trajectory": trajectory,
    }


def heldout_table(summary: dict[str, Any]) -> str:
    """Text table: IQM [95% CI] and mean per held-out setting (and configuration)."""
    rows = summary.get("heldout") or []
    if not rows:
        return ""
    multi = len(rows[0]["configs"]) > 1
    lines = ["held-out evaluation (final policies, deterministic):"]
    header = (
        f"  {'setting':<28}" + (f" {'configuration':<28}" if multi else "") + f" {'IQM':>9}  {'95% CI':>19} {'mean':>9}"
    )
    if summary.get("solved_threshold") is not None:
        header += "  solved"
    lines.append(header)
    for row in rows:
        for block in row["configs"]:
            if block.get("iqm") is None:
                continue
            lo, hi = block["ci95"]
            line = f"  {row['label']:<28}" + (f" {block['label']:<28}" if multi else "")
            line += f" {block['iqm']:>9.2f}  [{lo:>8.2f}, {hi:>8.2f}] {block['mean']:>9.2f}"
            if block.get("solved_fraction") is not None:
                line += f"  {block['solved_fraction'] * 100:5.0f}%"
            lines.append(line)
    return "\n".join(lines)


def plot_run(run_dir: str, records: list[Any], title: str, solved: float | None) -> None:
    """``curves.png``: deterministic-eval and training returns, IQM ± CI over members."""
    evals = [r for r in records if isinstance(r, EvalRecord)]
    updates = [r for r in records if isinstance(r, UpdateRecord)]

    def to_array(rows: list[Any]) -> np.ndarray:
        return np.asarray([[np.nan if v is None else v for v in row] for row in rows], np.float64).T

    panels = [
        ("deterministic eval return", np.asarray([r.env_steps for r in evals]), to_array(r.eval_return for r in evals))
    ]
    if updates:
        source, returns = updates, [r.episode_return for r in updates]
    else:  # strided records: the chunk's training statistics
        source = [r for r in evals if r.training and "episode_return" in r.training]
        returns = [r.training["episode_return"] for r in source]
    if source:
        train = to_array(returns)  # NaN where no episode ended
        for row in train:  # carry the last completed-episode return forward
            last = np.nan
            for i, v in enumerate(row):
                last = v if np.isfinite(v) else last
                row[i] = last
        panels.append(("training episode return", np.asarray([r.env_steps for r in source]), train))
    if evals and evals[-1].eval_sets is not None:
        panels.append(
            (
                "eval return by evaluation set",
                np.asarray([r.env_steps for r in evals]),
                {name: to_array(r.eval_sets[name] for r in evals) for name in evals[-1].eval_sets},
            )
        )
    stats.plot_curves(os.path.join(run_dir, "curves.png"), panels, title=title, solved_return=solved)


def flat_summary(summary: dict[str, Any]) -> dict[str, Any]:
    """The one-configuration summary.json of DESIGN.md: the configuration's
    fields at top level."""
    block = dict(summary["configs"][0])
    out = {"env": summary["env"], "algo": summary["algo"], "seeds": block.pop("seeds")}
    block.pop("label", None)
    block.pop("hparams", None)
    out.update({"total_timesteps": summary["total_timesteps"], **block})
    out.update({k: v for k, v in summary.items() if k not in out and k != "configs"})
    return out


def pbt_text(pbt: dict[str, Any]) -> str:
    ranked = pbt.get("fitness", "eval")
    lines = [
        f"PBT: best member {pbt['best_member']} (final {'' if ranked == 'eval' else ranked + ' '}"
        f"return {pbt['best_final_return']}); {pbt['copies']} exploit copies"
        + ("" if ranked == "eval" else f"; ranked on eval set {ranked}")
    ]
    lines.append("  hyperparameters of the best member's lineage, chunk by chunk:")
    names = list(pbt["best_trajectory"][0]["hparams"]) if pbt["best_trajectory"] else []
    extra = "" if ranked == "eval" else f" {ranked[:8]:>8}"
    lines.append("  " + f"{'env steps':>10} {'slot':>4} {'eval':>8}{extra}  " + "  ".join(f"{n:>12}" for n in names))

    def number(value: float | None) -> str:
        return f"{value if value is not None else float('nan'):>8.1f}"

    for row in pbt["best_trajectory"]:
        fitness = "" if ranked == "eval" else " " + number(row.get("fitness"))
        lines.append(
            "  "
            + f"{row['env_steps']:>10} {row['slot']:>4} {number(row['eval_return'])}{fitness}  "
            + "  ".join(f"{row['hparams'][n]:>12.4g}" for n in names)
        )
    return "\n".join(lines)
