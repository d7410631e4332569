"""One Ray cluster at a time on the test machine.

``ray stop`` (tests/test_launchers.py stops the cluster the docs start with
``ray start --head``) ends every Ray process of the machine, and
``address=auto`` joins the newest cluster: tests that start Ray hold this lock,
shared by the pytest-xdist workers, while their cluster lives."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator

import pytest

_held = [0]  # this process's depth of holding (a test inside a module that holds it already)


@contextlib.contextmanager
def ray_lock(factory: pytest.TempPathFactory) -> Iterator[None]:
    """Hold the machine's Ray lock (a file beside the xdist workers' temp dirs); re-entrant."""
    if _held[0]:
        _held[0] += 1
        try:
            yield
        finally:
            _held[0] -= 1
        return
    path = factory.getbasetemp().parent / "jaxrl-ray.lock"
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        _held[0] = 1
        try:
            yield
        finally:
            _held[0] = 0
            fcntl.flock(handle, fcntl.LOCK_UN)
