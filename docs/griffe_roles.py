"""A griffe extension for the API page: the docstrings' reST roles
(``:func:`gae```, ``:class:`~jaxrl.envs.Env```) become plain code spans
(`` `gae` ``, `` `Env` ``) and reST's ``::`` before a literal block becomes
``:`` (the indented block is a code block in Markdown too), which Markdown
renders; the rest of a docstring is already Markdown-compatible (``double
backticks`` are code spans there too)."""

from __future__ import annotations

import re
from typing import Any

import griffe

LITERAL_ALONE = re.compile(r"^[ \t]*::[ \t]*\n", re.M)  # a paragraph of its own: "::"
LITERAL_END = re.compile(r"(\S)::[ \t]*$", re.M)  # "… as follows::"
ROLE = re.compile(r":(?:py:)?(?:func|class|mod|meth|attr|data|exc|obj|const):`([^`]+)`")


def _span(match: re.Match) -> str:
    target = match.group(1)
    if target.startswith("~"):  # ~a.b.c shows c, as Sphinx does
        target = target[1:].rsplit(".", 1)[-1]
    return f"``{target}``"


def plain(text: str) -> str:
    """``text`` with every reST role replaced by a code span of its target, and
    its literal-block markers by Markdown's."""
    return LITERAL_END.sub(r"\1:", LITERAL_ALONE.sub("", ROLE.sub(_span, text)))


class ReSTRoles(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = plain(obj.docstring.value)
