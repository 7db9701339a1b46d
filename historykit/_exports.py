"""Module attributes resolved on first use: the framework packages' public names.

A framework package's `__init__` must import without its framework (the core imports every
built-in framework package to ask which one owns a message), so its public names are looked up in
their private modules when first read.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


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
