"""``python -m jaxrl.export RUN_DIR [seed=K] [out=DIR] [deterministic=true|false]``

Writes one trained seed's policy as a serialized ``jax.export`` artifact plus
its parameters, runnable with jax and numpy alone (no jaxrl import)::

    import jax, numpy as np
    exported = jax.export.deserialize(open("policy.jaxexport", "rb").read())
    params = np.load("params.npz")
    leaves = [params[f"p{i:04d}"] for i in range(len(params.files))]
    action = exported.call(leaves, obs, key_data)   # obs [B, *obs_shape] float32, key_data uint32 [2]

The batch dimension ``B`` is symbolic (any size). ``policy.json`` describes
the observation and action spaces; ``run_policy.py`` is the snippet above.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from jaxrl.core.errors import ConfigError
from jaxrl.perf import platform
from jaxrl.run import export

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        return 0
    platform.configure()
    platform.quiet_libraries()
    try:
        options: dict[str, Any] = {"seed": None, "out": None, "deterministic": "true"}
        run_dir = None
        for a in argv:
            key, sep, value = a.partition("=")
            if not sep:
                run_dir = a
            elif key in options:
                options[key] = value
            else:
                raise ConfigError(key, value, "unknown option", "use seed=, out= or deterministic=")
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
        )
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"exported to {os.path.abspath(out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
