"""historykit.errors: one root, the documented tree, and no bare ValueError/TypeError raised.

- The tree in `historykit.errors`' docstring is parsed and compared with the classes, so the
  documented hierarchy (and the built-in each class also derives from) cannot drift.
- An AST walk over every module of the package finds `raise ValueError(...)` / `raise TypeError(...)`:
  each is to be the fitting `historykit.errors` class (still a `ValueError` / `TypeError`).
- A few errors the core raises are caught as `HistoryKitError` and as the built-in they replaced.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import historykit
from historykit import errors
from historykit.errors import HistoryKitError

PACKAGE = Path(historykit.__file__).parent
ROOT = PACKAGE.parent


_BARE = frozenset({"ValueError", "TypeError"})


# --- (a) the documented tree is the class tree ------------------------------------------------


def _documented_tree() -> dict[str, tuple[str | None, tuple[str, ...]]]:
    """Class name -> (documented parent, built-ins named in brackets), read from the docstring."""
    doc = errors.__doc__ or ""
    block = re.search(r"```text\n(.*?)```", doc, re.S)
    assert block is not None, "historykit.errors' docstring has no ```text tree"
    tree: dict[str, tuple[str | None, tuple[str, ...]]] = {}
    parents: list[str] = []  # the open ancestors, one per depth
    for line in block.group(1).splitlines():
        if not line.strip():
            continue
        entry = re.match(r"^((?:[│ ] {3}|[├└]── )*)(\w+)(?: \(([\w, ]+)\))?", line)
        assert entry is not None, f"cannot read the tree line {line!r}"
        depth = len(entry.group(1)) // 4
        name = entry.group(2)
        builtins = tuple(b.strip() for b in entry.group(3).split(",")) if entry.group(3) else ()
        assert depth <= len(parents), f"{name} is indented past its parent"
        del parents[depth:]
        assert name not in tree, f"{name} is in the tree twice"
        tree[name] = (parents[-1] if parents else None, builtins)
        parents.append(name)
    return tree


def _class_tree() -> dict[str, tuple[str | None, tuple[str, ...]]]:
    """The same shape, from `__subclasses__()` walks from the root over the classes of historykit.errors."""
    tree: dict[str, tuple[str | None, tuple[str, ...]]] = {
        "HistoryKitError": (None, _builtin_bases(HistoryKitError))
    }

    def walk(cls: type) -> None:
        for sub in cls.__subclasses__():
            if sub.__module__ != errors.__name__:
                continue  # a subclass made elsewhere (a module's own, a test's) is not the public tree
            assert sub.__name__ not in tree, f"{sub.__name__} derives from two classes of the tree"
            tree[sub.__name__] = (cls.__name__, _builtin_bases(sub))
            walk(sub)

    walk(HistoryKitError)
    return tree


def _builtin_bases(cls: type) -> tuple[str, ...]:
    return tuple(
        b.__name__ for b in cls.__bases__ if b.__module__ == "builtins" and b not in (Exception, object)
    )


def test_the_documented_tree_is_the_class_tree() -> None:
    assert _documented_tree() == _class_tree()


def test_every_class_of_the_module_is_exported_and_in_the_tree() -> None:
    classes = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, Exception) and not issubclass(value, Warning)
    }
    # No warning classes: the package was never released, so it has no deprecations to announce.
    warnings = {
        name for name, value in vars(errors).items() if isinstance(value, type) and issubclass(value, Warning)
    }
    assert warnings == set()
    assert classes == set(errors.__all__) == set(_documented_tree())


def test_the_top_level_exports_the_root_and_user_error() -> None:
    assert historykit.HistoryKitError is errors.HistoryKitError
    assert historykit.UserError is errors.UserError
    assert {"HistoryKitError", "UserError"} <= set(historykit.__all__)


def test_the_tree_parser_sees_a_wrong_tree() -> None:
    """The comparison above can fail: a tree that moves a class is read as a different tree."""
    original = errors.__doc__
    try:
        errors.__doc__ = (
            (original or "")
            .replace("│   └── ArgumentTypeError (TypeError)", "├── ArgumentTypeError (TypeError)")
            .replace("│       └── WrongFrameworkError", "│   └── WrongFrameworkError")
        )
        assert errors.__doc__ != original
        assert _documented_tree()["ArgumentTypeError"] == ("HistoryKitError", ("TypeError",))
        assert _documented_tree() != _class_tree()
    finally:
        errors.__doc__ = original


# --- (b) no bare ValueError / TypeError -------------------------------------------------------


def _bare_raises(source: str) -> Iterator[tuple[int, str]]:
    """(line, name) of every `raise ValueError(...)`, `raise TypeError`, `raise builtins.ValueError(...)`."""
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Raise) or node.exc is None:
            continue
        target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
            name = target.attr if target.value.id == "builtins" else None
        else:
            name = target.id if isinstance(target, ast.Name) else None
        if name in _BARE:
            yield node.lineno, name


def _modules() -> list[str]:
    return sorted(path.relative_to(ROOT).as_posix() for path in PACKAGE.rglob("*.py"))


def test_no_module_raises_a_bare_value_or_type_error() -> None:
    found = [
        f"{module}:{line}: raise {name}"
        for module in _modules()
        for line, name in _bare_raises((ROOT / module).read_text(encoding="utf-8"))
    ]
    assert not found, (
        "raise the fitting historykit.errors class (InvalidArgumentError is a ValueError, "
        "ArgumentTypeError a TypeError):\n" + "\n".join(found)
    )


def test_the_walk_finds_bare_raises() -> None:
    source = "def f(x):\n    if x:\n        raise ValueError('x')\n    raise builtins.TypeError\n"
    assert sorted(_bare_raises(source)) == [(3, "ValueError"), (4, "TypeError")]
    assert not list(_bare_raises("raise InvalidArgumentError('x')\nraise\nraise KeyError(1)\n"))


# --- (c) what the core raises is both a HistoryKitError and the built-in it was -------------


def _raised(call: Callable[[], Any], builtin: type[Exception]) -> None:
    """`call` raises a `builtin` that is a HistoryKitError too."""
    with pytest.raises(builtin) as info:
        call()
    origin = Path(info.traceback[-1].path).resolve()
    module = origin.relative_to(ROOT).as_posix() if origin.is_relative_to(ROOT) else str(origin)
    assert isinstance(info.value, HistoryKitError), f"{type(info.value).__name__} raised in {module}"


def _history() -> list[historykit.Message]:
    return [historykit.Message.user("Fix the failing test"), historykit.Message.assistant("Done.")]


def test_errors_of_the_pipeline() -> None:
    from historykit._pipeline import ManualCompaction

    pipeline = historykit.Pipeline()
    _raised(lambda: pipeline.run(_history(), context_window=0), ValueError)
    _raised(lambda: pipeline.run(_history(), mode="both"), ValueError)  # type: ignore[arg-type]
    _raised(lambda: pipeline.run(_history(), binds_thinking="yes"), TypeError)  # type: ignore[arg-type]
    _raised(lambda: pipeline.compact(_history()), ValueError)  # no step compacts on request
    _raised(lambda: historykit.Pipeline([object()]), TypeError)  # type: ignore[list-item]
    _raised(lambda: ManualCompaction(keep_last=-1), ValueError)
    _raised(lambda: pipeline.run(["not a message"]), TypeError)


def test_errors_of_check_tokens_and_pin() -> None:
    _raised(lambda: historykit.check([{"role": "user"}]), TypeError)
    _raised(lambda: historykit.check("a history"), TypeError)
    _raised(lambda: historykit.TokenCounter(tokenizer="o200k_base"), TypeError)  # type: ignore[arg-type]
    _raised(lambda: historykit.TokenCounter(tokenizer=len).count_part(object()), TypeError)  # type: ignore[arg-type]
    _raised(lambda: historykit.pin(42), TypeError)
    _raised(lambda: historykit.Gauge(warn_at=2), ValueError)
    _raised(lambda: historykit.Pipeline(warn_at=0), ValueError)


def test_errors_of_the_formats(tmp_path: Path) -> None:
    from historykit.formats import read_transcript, resolve_format, write_transcript

    path = tmp_path / "chat.jsonl"
    path.write_text('{"role": "narrator", "content": "once upon a time"}\n', encoding="utf-8")
    _raised(lambda: resolve_format("docx"), ValueError)
    _raised(lambda: read_transcript(path), ValueError)  # a broken transcript: a TranscriptFormatError
    _raised(lambda: write_transcript(["not a message"], tmp_path / "out.jsonl", "chat"), TypeError)
    system = [historykit.Message.system("Be brief."), *_history()]
    _raised(lambda: write_transcript(system, tmp_path / "out.jsonl", "claude-code"), ValueError)
