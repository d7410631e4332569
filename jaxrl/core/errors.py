"""The one user-facing error: :class:`ConfigError` (field, value, constraint, fix)."""

from __future__ import annotations

import os
from typing import Any

__all__ = ["ConfigError", "error_line", "install_command", "make_dir"]


def error_line(error: BaseException, limit: int = 160) -> str:
    """The first line of ``str(error)`` (at most ``limit`` characters), or the
    exception's type name when it has no message: a reason to quote inside a
    one-line message."""
    text = str(error).strip()
    return text.splitlines()[0][:limit] if text else type(error).__name__


def make_dir(field_name: str, path: str, fix: str = "pass a path in a writable directory") -> str:
    """``os.makedirs(path, exist_ok=True)``, or a :class:`ConfigError` naming
    ``field_name`` when ``path`` is a file or cannot be created there."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise ConfigError(field_name, path, "is a file, not a directory", fix)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as error:
        raise ConfigError(field_name, path, f"cannot be created ({error.strerror or error_line(error)})", fix) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigError(field_name, path, "is not writable", fix)
    return path


class ConfigError(ValueError):
    """A user mistake: bad key, bad value, impossible sizes, missing files.

    ``str(error)`` is one line: field, value, constraint and a fix. The CLI
    prints it and exits with status 2.
    """

    def __init__(self, field_name: str, value: Any, constraint: str, fix: str):
        self.field = field_name
        self.value = value
        self.constraint = constraint
        self.fix = fix
        super().__init__(f"{field_name}={value!s}: {constraint}; fix: {fix}")


def install_command(extra: str) -> str:
    """The command that installs jaxrl's ``extra`` here: ``pip install 'jaxrl[extra]'``,
    or, when this jaxrl is a source checkout (``pip install -e .``), the same
    from that checkout (the package index's jaxrl would replace it)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    if (root / "pyproject.toml").is_file() and (root / "jaxrl" / "__init__.py").is_file():
        return f"pip install -e '{root}[{extra}]'"
    return f"pip install 'jaxrl[{extra}]'"
