"""Where the test suite's time goes: the training runs it made, read back from their summaries.

Every run the suite makes (the CLI in a subprocess, or ``train.main`` in the test's
process) writes a ``summary.json`` with its compile, training and wall seconds. This
reads them under a pytest base directory (default: the newest
``$TMPDIR/pytest-of-$USER/pytest-N``, kept by pytest after a session) and prints

* how many runs, and their wall seconds split into compiling (tracing, lowering and
  XLA), training, and the rest (imports, building the env, the final evaluation,
  checkpoints, plots);
* the same per test module (from the ``popen-gwN/<test>N/`` directory names) and
  the runs that trained longest (candidates for a smoke budget).

Run it right after ``make test`` (a later pytest session may remove the oldest
base directories), optionally with the per-test durations of that session
(``--durations FILE``: a TSV of nodeid, phase, seconds) for the suite's total:

    python experiments/suite_costs.py [BASETEMP] [--top 15] [--durations FILE]
"""

from __future__ import annotations

import argparse
import getpass
import json
import re
import sys
import tempfile
from collections import defaultdict
from pathlib import Path


def refuse(line: str) -> None:
    """Bad input: one line on stderr, exit 2."""
    print(f"error: {line}", file=sys.stderr)
    raise SystemExit(2)


def newest_basetemp() -> Path:
    """The newest ``pytest-N`` directory pytest left for this user."""
    root = Path(tempfile.gettempdir()) / f"pytest-of-{getpass.getuser()}"
    runs = [p for p in root.glob("pytest-*") if p.name.split("-")[-1].isdigit()]
    if not runs:
        refuse(f"no pytest base directory under {root}; fix: run make test first, or name one")
    return max(runs, key=lambda p: int(p.name.split("-")[-1]))


def module_of(path: Path, base: Path) -> str:
    """The test a run directory belongs to, as pytest named its tmp_path (``test_x_y0``)
    or its module's shared ``home`` (``user0``)."""
    parts = path.relative_to(base).parts
    start = 1 if parts and parts[0].startswith("popen-gw") else 0
    return re.sub(r"\d+$", "", parts[start]) if len(parts) > start else "?"


def read_runs(base: Path) -> list[dict]:
    rows = []
    for summary in base.rglob("summary.json"):
        try:
            data = json.loads(summary.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict) or "wall_time_s" not in data:
            continue  # a sweep's or a report's summary, not one run's
        rows.append(
            {
                "dir": summary.parent,
                "test": module_of(summary.parent, base),
                "compile": float(data.get("compile_time_s") or 0.0),
                "train": float(data.get("train_time_s") or 0.0),
                "wall": float(data.get("wall_time_s") or 0.0),
                "members": int(data.get("members") or 0),
                "steps": int(data.get("total_timesteps") or 0),
            }
        )
    return rows


def split(rows: list[dict]) -> str:
    wall = sum(r["wall"] for r in rows)
    comp, train = sum(r["compile"] for r in rows), sum(r["train"] for r in rows)
    rest = wall - comp - train
    pct = (lambda x: 100.0 * x / wall) if wall else (lambda x: 0.0)
    return (
        f"{len(rows):4d} runs  wall {wall:8.1f} s = compile {comp:7.1f} ({pct(comp):4.1f} %)"
        f" + train {train:7.1f} ({pct(train):4.1f} %) + rest {rest:7.1f} ({pct(rest):4.1f} %)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", nargs="?", type=Path, help="a pytest base directory (default: the newest)")
    parser.add_argument("--top", type=int, default=15, help="how many tests and runs to list")
    parser.add_argument("--durations", type=Path, help="per-test durations of the same session (TSV)")
    args = parser.parse_args()
    if args.base is not None and not args.base.is_dir():
        refuse(f"BASETEMP={args.base}: is not a directory; fix: name a pytest base directory (pytest-N)")
    if args.durations is not None and not args.durations.is_file():
        refuse(f"--durations={args.durations}: no such file; fix: name the session's per-test TSV, or leave it out")
    if args.top < 1:
        refuse(f"--top={args.top}: must be at least 1; fix: pass e.g. --top 15")
    base = args.base or newest_basetemp()
    rows = read_runs(base)
    print(f"runs under {base}")
    print("all      " + split(rows))
    if args.durations is not None:
        seen, total = set(), 0.0
        for line in args.durations.read_text().splitlines():
            parts = line.split("\t")
            if len(parts) >= 3 and (parts[0], parts[1]) not in seen:
                seen.add((parts[0], parts[1]))
                total += float(parts[2])
        runs_wall = sum(r["wall"] for r in rows)
        print(f"the session's tests took {total:.1f} worker-s; these runs' wall time is {runs_wall:.1f} s of it")
    by_test: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_test[r["test"]].append(r)
    print(f"\nthe {args.top} tests whose runs took longest:")
    for name, group in sorted(by_test.items(), key=lambda kv: -sum(r["wall"] for r in kv[1]))[: args.top]:
        print(f"  {name[:60]:60s} {split(group)}")
    print(f"\nthe {args.top} runs that trained longest:")
    for r in sorted(rows, key=lambda r: -r["train"])[: args.top]:
        print(
            f"  train {r['train']:6.1f} s  compile {r['compile']:5.1f} s  wall {r['wall']:6.1f} s  "
            f"{r['members']:3d} members × {r['steps']:>8d} steps  {r['test'][:40]}  {r['dir'].name}"
        )


if __name__ == "__main__":
    main()
