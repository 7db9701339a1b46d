"""The public API, checked by introspection: the public modules of `historykit` (a dotted path
with no `_`-prefixed part, found by walking the package) are exactly its entry points; each has an
`__all__` listing exactly the public names it holds that are historykit's; each name in it
resolves, is documented, and is public through and through.

- resolves: `getattr(module, name)` works (the framework packages' names are looked up lazily;
  this imports their frameworks, all installed here);
- documented: a class, function or module has a docstring; a constant or a type alias has the
  attribute docstring that follows its assignment, in the module that assigns it;
- nothing private leaks: no `_name` is exported, no exported object is a private one under a
  public alias, a class or function exported is historykit's own (not a dependency's re-exported
  as ours), and no exported signature names a private type.

What is public is what `__all__` says (curated in each `__init__`); this test keeps every such
name usable and documented, whatever is added."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from functools import cache
from types import ModuleType
from typing import Any

import pytest

import historykit


def public_modules() -> list[str]:
    """`historykit` and every module under it whose dotted path has no private part."""
    found = ["historykit"]
    for info in pkgutil.walk_packages(historykit.__path__, "historykit."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            found.append(info.name)
    return found


PUBLIC_MODULES = public_modules()


ENTRY_POINTS = {
    "historykit",
    "historykit.analysis",
    "historykit.checkpointers",
    "historykit.checkpointers.agent_server",
    "historykit.cli",
    "historykit.demo",
    "historykit.errors",
    "historykit.evaluation",
    "historykit.formats",
    "historykit.plugins",
    "historykit.plugins.langchain",
    "historykit.plugins.native_compaction",
    "historykit.plugins.pydantic_ai",
    "historykit.processors",
    "historykit.testing",
}
"""What users import from: the packages, `historykit.errors` (the exceptions to catch),
`historykit.checkpointers.agent_server` (a LangGraph Agent Server `langgraph.json` target) and
`historykit.plugins.native_compaction`. Every other module is an implementation module, private
(`_`-prefixed), its public names re-exported by its package's `__init__`."""


def test_the_public_modules_are_exactly_the_entry_points() -> None:
    # A new module is private unless it is a deliberate entry point added here: walking the package
    # (an import error would fail the walk, not skip a module) finds every module there is.
    assert set(PUBLIC_MODULES) == ENTRY_POINTS
    assert len(PUBLIC_MODULES) == len(set(PUBLIC_MODULES))


def _origin(module: ModuleType, name: str, value: Any) -> str:
    """The module `name` comes from: a class's or function's own module; for any other value, the
    module the entry point imports it from, or the entry point itself when it assigns it."""
    if inspect.isclass(value) or inspect.isroutine(value):
        return str(getattr(value, "__module__", None) or "")
    tree = _module_tree(module.__name__)
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    return node.module or ""
        if isinstance(node, ast.Import):
            for alias in node.names:
                if (alias.asname or alias.name.split(".")[0]) == name:
                    return alias.name
    return module.__name__


@pytest.mark.parametrize("module_name", sorted(ENTRY_POINTS))
def test_all_is_exactly_what_the_entry_point_defines_or_re_exports(module_name: str) -> None:
    # `__all__` lists every public name the entry point holds that is historykit's (defined in it
    # or re-exported from a private module), and nothing else: an imported helper left public
    # (`from historykit._x import helper` in an `__init__`) is a leak. Names a framework package
    # resolves lazily (its module `__getattr__`) are not in its namespace until first used.
    module = importlib.import_module(module_name)
    exported = set(module.__all__)
    namespace = {
        name: value
        for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, ModuleType)
    }
    ours = {
        name for name, value in namespace.items() if _origin(module, name, value).startswith("historykit")
    }
    lazy = exported - set(namespace)
    assert ours == exported - lazy, (
        f"{module_name}: not in __all__: {sorted(ours - exported)}; in __all__ but not defined: "
        f"{sorted((exported - lazy) - ours)}"
    )
    for name in lazy:
        assert getattr(module, "__getattr__", None) is not None, f"{module_name}.{name} is not defined"


@cache
def _module_tree(module_name: str) -> ast.Module | None:
    try:
        return ast.parse(inspect.getsource(importlib.import_module(module_name)))
    except (OSError, TypeError):
        return None


def _assigned_names(statement: ast.stmt) -> list[str]:
    if isinstance(statement, ast.Assign):
        return [t.id for t in statement.targets if isinstance(t, ast.Name)]
    if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
        return [statement.target.id]
    return []


def attribute_docstring(module_name: str, name: str, depth: int = 0) -> str | None:
    """The docstring after `name`'s assignment in `module_name`, or in the module it is imported
    from (followed through `from x import name`); `None` when there is none."""
    tree = _module_tree(module_name)
    if tree is None or depth > 5:
        return None
    body = tree.body
    for index, statement in enumerate(body):
        if name in _assigned_names(statement):
            following = body[index + 1] if index + 1 < len(body) else None
            if (
                isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
                and following.value.value.strip()
            ):
                return following.value.value
            return None
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    return attribute_docstring(node.module, alias.name, depth + 1)
    return None


def _documented(module_name: str, name: str, member: Any) -> bool:
    member = inspect.unwrap(member) if callable(member) else member  # functools.cache, ...
    if inspect.isclass(member) or inspect.isroutine(member) or isinstance(member, ModuleType):
        own = member.__doc__
        return bool(own and own.strip())
    return attribute_docstring(module_name, name) is not None


_PRIVATE_NAME = re.compile(r"(?<![\w.])_[A-Za-z]\w*")


def _annotations(member: Any) -> list[str]:
    """The annotations of a function's or a class constructor's signature, as written."""
    try:
        signature = inspect.signature(member)
    except (TypeError, ValueError):
        return []
    found = [str(p.annotation) for p in signature.parameters.values() if p.annotation is not p.empty]
    if signature.return_annotation is not signature.empty:
        found.append(str(signature.return_annotation))
    return found


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_exported_name_resolves_is_documented_and_public(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert module.__doc__ and module.__doc__.strip(), f"{module_name} has no docstring"
    exported = getattr(module, "__all__", None)
    assert isinstance(exported, (list, tuple)), f"{module_name} has no __all__"
    assert len(set(exported)) == len(exported), f"{module_name}.__all__ repeats a name"
    problems: list[str] = []
    for name in exported:
        if name.startswith("_"):
            problems.append(f"{name}: a private name exported")
            continue
        try:
            member = getattr(module, name)
        except AttributeError as error:
            problems.append(f"{name}: does not resolve ({error})")
            continue
        if not _documented(module_name, name, member):
            problems.append(f"{name}: no docstring")
        if inspect.isclass(member) or inspect.isfunction(member):
            own = getattr(member, "__name__", name)
            if own.startswith("_"):
                problems.append(f"{name}: the private {own} under a public name")
            if not member.__module__.startswith("historykit."):
                problems.append(f"{name}: {member.__module__}'s, re-exported as historykit's")
            for annotation in _annotations(member):
                for private in _PRIVATE_NAME.findall(annotation):
                    problems.append(f"{name}: its signature names the private {private}")
    assert not problems, f"{module_name}:\n" + "\n".join(problems)


def test_the_top_level_names_are_the_everyday_ones() -> None:
    # `import historykit` gives what most users need without a second import; a check that the
    # curated `__init__` still holds them (the rest lives in the subpackages).
    for name in ("Message", "Pipeline", "default_pipeline", "TokenCounter", "HistoryKitError", "check"):
        assert name in historykit.__all__
        assert getattr(historykit, name) is not None
