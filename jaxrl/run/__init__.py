"""The host side: config parsing and validation (:mod:`~jaxrl.run.config`), the
training and sweep jobs, the chunk driver, checkpoints, sharding and
``jax.distributed``, logs, statistics, reports, policy loading, export and
rendering. The CLI entry points (``jaxrl.train``, …) parse argv and call these."""
