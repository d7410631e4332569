"""Test settings: CPU only, deterministic, small."""

import os
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("MPLBACKEND", "Agg")
# Compiled programs are shared between the tests (and their subprocesses) of one
# session through a private persistent cache, never the user's.
os.environ.setdefault("JAXRL_COMPILE_CACHE", tempfile.mkdtemp(prefix="jaxrl-xla-cache-"))
