"""The bottom layer: the user-facing error (:mod:`~jaxrl.core.errors`), shared
validators (:mod:`~jaxrl.core.checks`), the run config dataclasses
(:mod:`~jaxrl.core.config`) and the typed algorithm contract with its registry
(:mod:`~jaxrl.core.contract`). Imports no other jaxrl package."""
