"""mkdocs hook: the configuration reference on cli.md, generated from the schema.

``<!-- config-keys -->`` on a page is followed by tables of every key of
:func:`jaxrl.run.overrides.schema` (the run, ``env.*``, ``eval.*``, ``pbt.*``,
``sweep.*``, ``dist.*``), one table of ``algo.*`` keys per registered algorithm
(the traced hyperparameters marked) and one of the sweep launcher's
``launcher.*`` keys (:class:`jaxrl.run.launch.LauncherConfig`). A key's
description is the ``# comment`` at the end of its dataclass field (or, when the
field has none, the comment lines right above it), read from the class source,
so the page cannot drift from the code: tests/test_docs.py checks that the built
page lists every key. ``<!-- cli-usage -->`` becomes each command's ``--help``
text, taken from the command's module. The generated text is committed between
each marker and its end marker (``<!-- /config-keys -->``), so that cli.md reads
whole as a file; ``python docs/hooks.py`` regenerates it, and a test checks that
it is current.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import textwrap
import tokenize
from typing import Any

from jaxrl import evaluate, export, report, sweep, train
from jaxrl.core.config import SECTIONS, Config
from jaxrl.core.fields import traced_names
from jaxrl.run.launch import LauncherConfig
from jaxrl.run.overrides import ALGOS, schema

MARKER = "<!-- config-keys -->"
USAGE_MARKER = "<!-- cli-usage -->"


def comments(cls: type) -> dict[str, str]:
    """``{field name: description}`` of the dataclass ``cls`` and its bases:
    each field's trailing ``# comment`` (the comments on the lines of its
    definition, joined), else the comment lines right above it. Separator
    comments (``# --- static … ---``) are not descriptions."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is object or not dataclasses.is_dataclass(klass):
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        by_line: dict[int, str] = {}
        code_lines: set[int] = set()
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                text = tok.string.lstrip("#").strip()
                if not text.startswith("---"):
                    by_line[tok.start[0]] = text
            elif tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
                code_lines.update(range(tok.start[0], tok.end[0] + 1))
        body = ast.parse(source).body[0].body
        for stmt in body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            own = [by_line[n] for n in range(stmt.lineno, stmt.end_lineno + 1) if n in by_line]
            if not own:
                above, n = [], stmt.lineno - 1
                while n in by_line and n not in code_lines:
                    above.insert(0, by_line[n])
                    n -= 1
                own = above
            if own:
                out[stmt.target.id] = " ".join(own)
    return out


def _value(value: Any) -> str:
    """A default as it is written on the command line."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (tuple, list)):
        return "[" + ",".join(_value(v) for v in value) + "]"
    if isinstance(value, str):
        return value if value else '""'
    if isinstance(value, float) and len(repr(value)) > 8:  # 1e10, not 10000000000.0
        short = f"{value:g}"
        return short if float(short) == value else repr(value)
    return repr(value)


def default(f: dataclasses.Field) -> str:
    if f.default is not dataclasses.MISSING:
        return _value(f.default)
    if f.default_factory is not dataclasses.MISSING:
        return _value(f.default_factory())
    return "(required)"


def _type(f: dataclasses.Field) -> str:
    return f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ").replace("<", "&lt;").replace(">", "&gt;")


def _code(text: str) -> str:
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def table(rows: list[tuple[str, ...]], header: tuple[str, ...]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def owner(key: str, algo: str) -> type:
    """The dataclass whose field ``key`` is."""
    section, _, _ = key.partition(".")
    if section == "algo":
        return ALGOS[algo]
    return SECTIONS[section] if section in SECTIONS else Config


def run_keys() -> dict[str, list[tuple[str, str, str, str]]]:
    """``{section: [(key, type, default, description)]}`` of every key of
    ``schema()`` but ``algo.*`` (the same for every algorithm)."""
    out: dict[str, list[tuple[str, str, str, str]]] = {"": []}
    for key, f in schema().items():
        if key.startswith("algo."):
            continue
        section = key.partition(".")[0] if "." in key else ""
        out.setdefault(section, []).append((key, _type(f), default(f), comments(owner(key, "ppo")).get(f.name, "")))
    return out


def algo_keys(algo: str) -> list[tuple[str, str, str, str, bool]]:
    """``[(key, type, default, description, traced)]`` of ``algo``'s ``algo.*`` keys."""
    cls = ALGOS[algo]
    notes = comments(cls)
    traced = set(traced_names(cls))
    return [
        (key, _type(f), default(f), notes.get(f.name, ""), f.name in traced)
        for key, f in schema(algo).items()
        if key.startswith("algo.")
    ]


def launcher_keys() -> list[tuple[str, str, str, str]]:
    """``[(key, type, default, description)]`` of the sweep launcher's keys."""
    notes = comments(LauncherConfig)
    return [
        ("launcher" if f.name == "name" else f"launcher.{f.name}", _type(f), default(f), notes.get(f.name, ""))
        for f in dataclasses.fields(LauncherConfig)
    ]


SECTION_TITLES = {
    "": "The run",
    "env": "`env.*`: the environment",
    "eval": "`eval.*`: evaluation",
    "pbt": "`pbt.*`: population-based training",
    "sweep": "`sweep.*`: sweeps (`python -m jaxrl.sweep`)",
    "dist": "`dist.*`: multi-host runs",
}


def _doc(cls: type) -> str:
    return " ".join(inspect.cleandoc(cls.__doc__ or "").split())


def reference() -> str:
    """The Markdown that replaces :data:`MARKER`."""
    header = ("key", "type", "default", "description")
    out = []
    for section, rows in run_keys().items():
        out.append(f"### {SECTION_TITLES.get(section, f'`{section}.*`')}\n")
        doc = _doc(SECTIONS[section] if section else Config)
        if doc:
            out.append(doc + "\n")
        out.append(table([(_code(k), _code(t), _code(d), c) for k, t, d, c in rows], header))
    out.append(
        "### `algo.*`: each algorithm's keys\n\n"
        "`algo=NAME` picks the algorithm; its keys below are `algo.KEY=VALUE`. "
        "**traced** keys are float hyperparameters passed to the compiled program as an "
        "argument (swept in one program, evolvable under PBT); the others are static "
        "settings the program closes over (a sweep over them compiles one program per value). "
        "Per-env presets change some defaults before your overrides apply.\n"
    )
    for algo in ALGOS:
        cls = ALGOS[algo]
        out.append(f"#### `algo={algo}`\n")
        doc = _doc(cls)
        if doc:
            out.append(doc + "\n")
        rows = [(_code(k), _code(t), _code(d), c, "traced" if tr else "static") for k, t, d, c, tr in algo_keys(algo)]
        out.append(table(rows, ("key", "type", "default", "description", "kind")))
    out.append("### `launcher.*`: where a sweep's groups run (`python -m jaxrl.sweep`)\n")
    out.append(_doc(LauncherConfig) + "\n")
    out.append(table([(_code(k), _code(t), _code(d), c) for k, t, d, c in launcher_keys()], header))
    return "\n".join(out)


def usage() -> str:
    """The Markdown that replaces :data:`USAGE_MARKER`: each command's ``--help``."""
    out = []
    for module in (train, sweep, evaluate, export, report):
        name = module.__name__
        text = (getattr(module, "USAGE", None) or module.__doc__ or "").strip("\n").rstrip()  # what --help prints
        out.append(f"### `{name}`\n\n```text\n{text}\n```\n")
    return "\n".join(out)


def fill(markdown: str) -> str:
    """``markdown`` with the text between each marker and its end marker
    (``<!-- /cli-usage -->``, ``<!-- /config-keys -->``) generated afresh."""
    for marker, generate in ((USAGE_MARKER, usage), (MARKER, reference)):
        if marker not in markdown:
            continue
        end = marker.replace("<!-- ", "<!-- /")
        head, _, rest = markdown.partition(marker)
        _, found, tail = rest.partition(end)
        if not found:
            raise ValueError(f"{marker} has no {end}")
        markdown = f"{head}{marker}\n\n{generate().strip()}\n\n{end}{tail}"
    return markdown


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return fill(markdown)


if __name__ == "__main__":  # python docs/hooks.py: regenerate the committed text of docs/cli.md
    import pathlib

    page = pathlib.Path(__file__).with_name("cli.md")
    page.write_text(fill(page.read_text()))
    print(f"regenerated {page}")
