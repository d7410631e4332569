"""``python -m jaxrl.export RUN_DIR [seed=K] [config=LABEL] [out=DIR] [deterministic=true|false]``

Writes one trained seed's policy as a serialized ``jax.export`` artifact plus
the parameters it reads (named; no critic, optimizer state or replay buffer),
runnable with jax, numpy and flatbuffers alone (no jaxrl import): see
:data:`USAGE`, which ``--help`` prints.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from jaxrl.perf import platform  # noqa: I001  (first: it settles the process before jax loads)

if __name__ == "__main__":  # python -m jaxrl.export: XLA's log level and flags before jaxlib loads
    platform.configure()

from jaxrl.core.errors import ConfigError  # noqa: E402
from jaxrl.run import export  # noqa: E402

__all__ = ["USAGE", "main"]

USAGE = """usage: python -m jaxrl.export RUN_DIR [seed=K] [config=LABEL] [out=DIR] [deterministic=true|false]

Writes one trained seed's policy (default: the run's first seed; in a sweep
group directory, of configuration config=LABEL) to out= (default:
RUN_DIR/export-seedK, in a sweep group RUN_DIR/export-LABEL-seedK): policy.jaxexport (a serialized jax.export
artifact, batch size symbolic), params.npz (the parameters the policy reads,
by name), policy.json (spaces, call signature, parameter order) and
run_policy.py. Running it needs jax, numpy and flatbuffers only
(pip install jax numpy flatbuffers), no jaxrl:

    import json, jax, numpy as np
    spec = json.load(open("policy.json"))
    exported = jax.export.deserialize(open("policy.jaxexport", "rb").read())
    params = np.load("params.npz")
    leaves = [params[name] for name in spec["params"]]
    action = exported.call(leaves, obs, key_data)  # obs [B, *obs_shape] float32, key_data uint32 [2]

deterministic=false exports the sampling policy (key_data then matters). A
recurrent policy takes and returns its carry: see policy.json's "call"."""


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in argv):
        print(USAGE)
        return 0
    platform.configure()
    platform.quiet_libraries()
    try:
        options: dict[str, Any] = {"seed": None, "config": None, "out": None, "deterministic": "true"}
        run_dir = None
        for a in argv:
            key, sep, value = a.partition("=")
            if not sep:
                run_dir = a
            elif key in options:
                options[key] = value
            else:
                raise ConfigError(key, value, "unknown option", "use seed=, config=, out= or deterministic=")
        if run_dir is None:
            raise ConfigError("run_dir", "(none)", "a run directory is needed", "pass RUN_DIR")
        if options["deterministic"] not in ("true", "false"):
            raise ConfigError(
                "deterministic", options["deterministic"], "must be true or false", "pass deterministic=true"
            )
        if options["seed"] is not None:
            try:
                options["seed"] = int(options["seed"])
            except ValueError:
                raise ConfigError("seed", options["seed"], "must be a seed id", "pass e.g. seed=0") from None
        out = export.export_policy(
            run_dir,
            options["seed"],
            options["out"],
            options["deterministic"] == "true",
            log=lambda text: print(text, file=sys.stderr),
            config_label=options["config"],
        )
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"exported to {os.path.abspath(out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
