"""SIGINT and SIGTERM during a run: finish the current chunk, checkpoint, exit
130 / 143 (a second signal aborts at once)."""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

__all__ = ["StopRequest"]


class StopRequest:
    """SIGINT/SIGTERM → finish the current chunk, checkpoint, exit 130/143."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._previous[signum] = signal.getsignal(signum)
            signal.signal(signum, self._handle)

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signum is not None:  # second signal: give up immediately
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        self.signum = signum
        sys.stderr.write(f"\n{signal.Signals(signum).name}: stopping after the current chunk (again to abort)\n")

    def restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    @property
    def exit_code(self) -> int:
        return 128 + int(self.signum or 0)
