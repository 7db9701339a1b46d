"""Where a class is defined, found once per source file rather than once per class (Python < 3.13).

Pydantic AI builds a JSON schema for each durable operation of a capability when an agent is built
with a durability capability (`HistoryKit`'s take the request's messages), with attribute
docstrings: Pydantic reads the source of every message dataclass (`inspect.getsourcelines`). Before
Python 3.13 (`__firstlineno__`), `inspect.findsource` parses the class's whole module for every
class: hundreds of parses of `pydantic_ai/messages.py`, about ten seconds of CPU per agent, which
the durable-execution tests pay in every process and every flow run. `install()` makes each module
parsed once: the same walk as `inspect._ClassFinder` (the first class of that qualified name, its
first decorator's line), every class of the file indexed in it. What it finds is what
`inspect.findsource` finds; a class it does not index goes to `inspect.findsource` itself.
"""

from __future__ import annotations

import ast
import inspect
import sys
from typing import Any

_original_findsource = inspect.findsource
_index: dict[int, tuple[list[str], dict[str, int]]] = {}
"""By `id()` of the module's lines from `linecache` (a changed file gets new lines): the lines (kept,
so the id is not reused) and the 0-based line of each class, by qualified name."""


class _Classes(ast.NodeVisitor):
    """Every class's qualified name and first line, as `inspect._ClassFinder` finds one."""

    def __init__(self) -> None:
        self.stack: list[str] = []
        self.lines: dict[str, int] = {}

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.stack += [node.name, "<locals>"]
        self.generic_visit(node)
        del self.stack[-2:]

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.stack.append(node.name)
        line = node.decorator_list[0].lineno if node.decorator_list else node.lineno
        self.lines.setdefault(".".join(self.stack), line - 1)  # the first in source order wins
        self.generic_visit(node)
        self.stack.pop()


def _findsource(obj: Any) -> tuple[list[str], int]:
    module = inspect.getmodule(obj) if inspect.isclass(obj) else None
    if module is None:
        return _original_findsource(obj)
    try:
        lines, _ = _original_findsource(module)
    except (OSError, TypeError):
        return _original_findsource(obj)
    if inspect.getsourcefile(obj) != inspect.getsourcefile(module):
        return _original_findsource(obj)
    cached = _index.get(id(lines))
    if cached is None or cached[0] is not lines:
        classes = _Classes()
        classes.visit(ast.parse("".join(lines)))
        cached = _index[id(lines)] = (lines, classes.lines)
    line = cached[1].get(obj.__qualname__)
    return (lines, line) if line is not None else _original_findsource(obj)


def install() -> None:
    """Use the indexed lookup in this process (nothing to do from Python 3.13 on)."""
    if sys.version_info < (3, 13):
        inspect.findsource = _findsource
