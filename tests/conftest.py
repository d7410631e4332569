"""Test settings: CPU only, deterministic, small; the fixtures many modules share."""

import atexit
import os
import shutil
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("MPLBACKEND", "Agg")
# XLA's C++ log lines stay out of the test session's own output (cached programs
# loaded in-process make some); subprocesses run as users do (tests/helpers.user_env)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# Compiled programs are shared between the tests (and their subprocesses) of one
# session through a private persistent cache, never the user's; the session
# that made it removes it at exit (≈ 27 MB per run of the suite).
if "JAXRL_COMPILE_CACHE" not in os.environ:
    _cache = tempfile.mkdtemp(prefix="jaxrl-xla-cache-")
    os.environ["JAXRL_COMPILE_CACHE"] = _cache
    atexit.register(shutil.rmtree, _cache, ignore_errors=True)
# The CLI's one-XLA:CPU-device-per-core split (jaxrl.perf.platform.split_cpu_devices)
# is off in tests so runs compare on one device; tests/test_parallel.py turns it on.
os.environ.setdefault("JAXRL_CPU_DEVICES", "1")
# Likewise the CLI's one-thread XLA:CPU pool for small one-seed runs
# (jaxrl.perf.platform.size_cpu_pool): the session and its subprocesses keep XLA's
# default pool (one thread per usable core), set explicitly so the CLI leaves it;
# tests/test_parallel.py checks the automatic choice in a subprocess without it.
from jaxrl.perf.platform import enable_compile_cache, usable_cores  # noqa: E402  (after the settings above)

os.environ.setdefault("PJRT_NPROC", str(usable_cores()))
# the tests' own programs (built in-process, not through the CLI) use the same cache:
# a program another test or subprocess compiled is loaded, not compiled again
enable_compile_cache(os.environ["JAXRL_COMPILE_CACHE"])


import pytest  # noqa: E402


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """A user's working directory, one per test module: runs land in its runs/."""
    return tmp_path_factory.mktemp("user")


@pytest.fixture
def ray_machine(tmp_path_factory):
    """This test starts Ray (a local runtime, or ``ray start``): it holds the machine's Ray lock."""
    from tests.ray_lock import ray_lock

    with ray_lock(tmp_path_factory):
        yield
