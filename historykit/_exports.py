"""Module attributes resolved on first use: the framework packages' public names, and moved names.

A framework package's `__init__` must import without its framework (the core imports every
built-in framework package to ask which one owns a message), so its public names are looked up in
their private modules when first read. A module that names moved away keeps them for one release:
reading one warns (`DeprecationWarning`) with the new path and gives the very same object.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes", "moved_attributes"]


def lazy_attributes(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package`: `where` maps each name to the module that defines it.

    Example:
        ```python
        __getattr__ = lazy_attributes(__name__, {"PydanticAIAdapter": f"{__name__}._adapter"})
        ```
    """

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__


def moved_attributes(old: str, moved: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for the old module `old`: `moved` maps each name to its new module.

    Example:
        ```python
        __getattr__ = moved_attributes(__name__, {"HistoryKit": "historykit.plugins.pydantic_ai"})
        ```
    """

    def __getattr__(name: str) -> Any:
        new = moved.get(name)
        if new is None:
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        warnings.warn(
            f"{old}.{name} moved to {new}.{name}: import it from {new} ({old} keeps it for one release)",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(new), name)

    return __getattr__
