"""``python -m jaxrl.report RUN_DIR [RUN_DIR ...] [out=DIR] [target=X] [set=NAME]``

Compares finished runs and sweeps with honest statistics (Agarwal et al., 2021,
"Deep RL at the Edge of the Statistical Precipice", arXiv:2108.13264): per
configuration the IQM, mean, median and optimality gap of the final
deterministic-evaluation returns, each with a stratified-bootstrap 95% CI
(strata = environments); the probability that the best configuration
improves on each runner-up; the fraction of runs solved; learning curves with
CI bands, final-return distributions and performance profiles.

``set=NAME`` scores every run on its evaluation set ``NAME`` (``eval.sets``)
instead of its own evaluation: e.g. a nominal and a randomized run compared
on the same held-out set.

Writes ``report.md``, ``report.csv``, ``report.json`` and the plots to
``out=`` (default: a new ``./report-<timestamp>``; a run's or sweep's own
files are never touched) and prints the Markdown table.
"""

from __future__ import annotations

import os
import sys
import time

from jaxrl.perf import platform  # noqa: I001  (first: it settles the process before jax loads)

if __name__ == "__main__":  # python -m jaxrl.report: XLA's log level and flags before jaxlib loads
    platform.configure()

import numpy as np  # noqa: E402

from jaxrl.core.errors import ConfigError  # noqa: E402
from jaxrl.run import report as report_lib  # noqa: E402

__all__ = ["USAGE", "main"]


USAGE = """usage: python -m jaxrl.report RUN_DIR [RUN_DIR ...] [out=DIR] [target=X] [plots=true] [set=NAME]

  set=NAME compares the runs on their evaluation set NAME (eval.sets) instead
  of their own evaluation."""


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in argv):
        print(USAGE)
        return 0
    platform.configure()
    platform.quiet_libraries()
    try:
        options = {"out": None, "target": None, "plots": "true", "set": None}
        dirs = []
        for a in argv:
            key, sep, value = a.partition("=")
            if sep and key in options:
                options[key] = value
            elif sep:
                raise ConfigError(key, value, "unknown option", "use out=DIR, target=X, plots=true|false or set=NAME")
            else:
                dirs.append(a)
        if not dirs:
            raise ConfigError("run_dir", "(none)", "at least one run or sweep directory is needed", "pass RUN_DIR")
        target = None
        if options["target"] is not None:
            try:
                target = float(options["target"])
            except ValueError:
                target = float("nan")
            if not np.isfinite(target):
                raise ConfigError("target", options["target"], "must be a finite number", "pass e.g. target=475")
        if options["plots"] not in ("true", "false"):
            raise ConfigError("plots", options["plots"], "must be true or false", "pass plots=true")
        entries = []
        for d in dirs:
            loaded = report_lib.load(d, eval_set=options["set"])
            if len(dirs) > 1 and len(loaded) == 1:
                loaded[0].label = os.path.basename(os.path.normpath(d))
            elif len(dirs) > 1:
                for e in loaded:
                    e.label = f"{os.path.basename(os.path.normpath(d))}: {e.label}"
            entries += loaded
        out = options["out"] or _new_dir(f"report-{time.strftime('%Y%m%d-%H%M%S')}")
        report = report_lib.build(entries, target)
        report["eval_set"] = options["set"]
        text = report_lib.write(entries, report, out, plots=options["plots"] == "true")
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(text)
    print(f"\nreport written to {os.path.abspath(out)}", file=sys.stderr)
    return 0


def _new_dir(name: str) -> str:
    """``name``, or ``name-2``, ``name-3``, … when it exists (two reports in one second)."""
    candidate, n = name, 1
    while os.path.exists(candidate):
        n += 1
        candidate = f"{name}-{n}"
    return candidate


if __name__ == "__main__":
    sys.exit(main())
