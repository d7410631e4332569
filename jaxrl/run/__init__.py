"""The host side: config parsing and validation (:mod:`~jaxrl.run.overrides`,
:mod:`~jaxrl.run.validation`), one resolved run (:mod:`~jaxrl.run.spec`), the
training and sweep jobs, the chunk loop, checkpoints, sharding and
``jax.distributed``, logs, statistics, reports, policy loading, export and
rendering. The CLI entry points (``jaxrl.train``, …) parse argv and call these."""
