"""Small I/O helpers of the host side: JSON values out of numpy/jax ones,
atomic JSON files, and the append-only JSON lines of ``metrics.jsonl``."""

from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np

__all__ = ["jsonable", "write_json", "read_json", "JsonlWriter"]


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


def write_json(path: str, data: dict[str, Any]) -> None:
    """``data`` as indented JSON at ``path``, written atomically (NaN → null)."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(jsonable(data), f, indent=2, allow_nan=False)
        f.write("\n")
    os.replace(tmp, path)


def read_json(path: str) -> Any:
    with open(path) as f:
        return json.load(f)
