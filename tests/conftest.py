"""Test settings: CPU only, deterministic, small."""

import os
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("MPLBACKEND", "Agg")
# Compiled programs are shared between the tests (and their subprocesses) of one
# session through a private persistent cache, never the user's.
os.environ.setdefault("JAXRL_COMPILE_CACHE", tempfile.mkdtemp(prefix="jaxrl-xla-cache-"))
# The CLI's one-XLA:CPU-device-per-core split (jaxrl._platform.split_cpu_devices)
# is off in tests so runs compare on one device; tests/test_parallel.py turns it on.
os.environ.setdefault("JAXRL_CPU_DEVICES", "1")
