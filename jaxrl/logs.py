"""Host-side logging: live progress fed from the compiled loop, JSON lines.

(Named ``logs`` so it never shadows the standard library's ``logging``.)
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
import time
from typing import Any, TextIO

import numpy as np

__all__ = ["LiveProgress", "JsonlWriter", "jsonable", "format_count"]


def format_count(n: float) -> str:
    """``1234567 → '1.23M'``."""
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.3g}{unit}"
    return f"{n:.0f}"


def _format_time(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


class LiveProgress:
    """Receives per-update progress from inside the compiled program
    (``jax.debug.callback``) and renders one status line: env steps, steps/s,
    mean/min/max recent episode return across seeds, ETA.

    On a terminal the line is redrawn in place; otherwise a line is printed at
    most every ``interval`` seconds.
    """

    def __init__(
        self,
        total_updates: int,
        steps_per_update: int,
        num_seeds: int,
        start_update: int = 0,
        enabled: bool = True,
        stream: TextIO | None = None,
        interval: float = 5.0,
    ):
        self.total_updates = total_updates
        self.steps_per_update = steps_per_update
        self.num_seeds = num_seeds
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.interval = 0.25 if self.tty else interval
        self.last_return = np.full(num_seeds, np.nan)
        self.update = start_update
        self._t_first: float | None = None
        self._u_first = start_update
        self._t_print = 0.0
        self._lock = threading.Lock()
        self._dirty = False

    # called from an XLA host-callback thread
    def __call__(self, progress: Any) -> None:
        with self._lock:
            now = time.perf_counter()
            update = int(np.asarray(progress.update))
            sums = np.asarray(progress.episode_return_sum, np.float64)
            counts = np.asarray(progress.episodes)
            have = counts > 0
            self.last_return[have] = sums[have] / counts[have]
            if self._t_first is None:
                self._t_first, self._u_first = now, update - 1
            self.update = update
            if self.enabled and (now - self._t_print >= self.interval or update >= self.total_updates):
                self._t_print = now
                self._render(now)

    def steps_per_second(self, now: float | None = None) -> float:
        if self._t_first is None:
            return math.nan
        now = time.perf_counter() if now is None else now
        elapsed = now - self._t_first
        done = (self.update - self._u_first) * self.steps_per_update * self.num_seeds
        return done / elapsed if elapsed > 0 else math.nan

    def line(self, now: float | None = None) -> str:
        now = time.perf_counter() if now is None else now
        frac = self.update / max(1, self.total_updates)
        width = 20
        filled = int(round(frac * width))
        bar = "█" * filled + "░" * (width - filled)
        rate = self.steps_per_second(now)
        remaining = (self.total_updates - self.update) * self.steps_per_update * self.num_seeds
        eta = remaining / rate if rate and math.isfinite(rate) and rate > 0 else math.nan
        steps = self.update * self.steps_per_update
        total = self.total_updates * self.steps_per_update
        ret = self.last_return[np.isfinite(self.last_return)]
        ret_text = f"return mean {ret.mean():.1f} min {ret.min():.1f} max {ret.max():.1f}" if ret.size else "return -"
        return (
            f"[{bar}] {frac * 100:3.0f}% | {format_count(steps)}/{format_count(total)} steps/seed"
            f" × {self.num_seeds} | {format_count(rate) if math.isfinite(rate) else '?'} steps/s"
            f" | {ret_text} | ETA {_format_time(eta)}"
        )

    def _render(self, now: float) -> None:
        text = self.line(now)
        if self.tty:
            self.stream.write("\r\x1b[2K" + text)
            self._dirty = True
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        with self._lock:
            if self.enabled and self.tty and self._dirty:
                self.stream.write("\n")
                self.stream.flush()
                self._dirty = False

    def message(self, text: str) -> None:
        """Print a line without mangling the live status line."""
        with self._lock:
            if self.tty and self._dirty:
                self.stream.write("\r\x1b[2K")
            self.stream.write(text + "\n")
            if self.tty and self._dirty:
                self.stream.write(self.line())
            self.stream.flush()


def jsonable(obj: Any) -> Any:
    """numpy/jax values → JSON types; NaN and inf → None (JSON has no NaN)."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if hasattr(obj, "tolist") and not isinstance(obj, (str, bytes)):
        return jsonable(obj.tolist())
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, (np.floating,)):
        return jsonable(float(obj))
    if isinstance(obj, (np.integer,)):
        return int(obj)
    return obj


class JsonlWriter:
    """Append-only JSON lines; ``truncate(keep)`` drops records after a resume point."""

    def __init__(self, path: str):
        self.path = path

    def write(self, records: list[dict[str, Any]]) -> None:
        with open(self.path, "a") as f:
            for record in records:
                f.write(json.dumps(jsonable(record), allow_nan=False) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def read(self) -> list[dict[str, Any]]:
        if not os.path.exists(self.path):
            return []
        out = []
        with open(self.path) as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    break  # a torn last line from a crash
        return out

    def truncate(self, keep: Any) -> None:
        """Rewrite the file keeping only records for which ``keep(record)`` holds."""
        records = [r for r in self.read() if keep(r)]
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            for record in records:
                f.write(json.dumps(record, allow_nan=False) + "\n")
        os.replace(tmp, self.path)
