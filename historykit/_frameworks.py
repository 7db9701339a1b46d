"""The seam between the core and the agent frameworks: one `Framework` object per framework.

The core (pipeline, token counting, validity, formats, pinning, summarizers) works on neutral
messages and never names a framework. Whatever depends on one framework's types lives in that
framework's package under `historykit.plugins`, which registers one `Framework` object here when it
is imported: which native classes it owns, its message adapter, the usage its provider reported on
a response, its JSON transcript format, pinning a native message, and a summarizer made from one of
its models. The core asks this registry.

The built-in framework packages are imported on the first lookup (`BUILTIN_PACKAGES`); they import
their framework only when one of its messages or models is handled, so importing `historykit` (or
asking about a neutral history) imports no framework. A third framework is added by one package
that calls `register` when it is imported.

Example:
    ```python
    from historykit._frameworks import adapter_for, framework_of

    adapter = adapter_for(messages)        # the adapter of the framework the messages come from
    neutral = adapter.to_neutral(messages)
    framework_of(type(messages[0])).name  # 'pydantic-ai', 'langchain', 'neutral', ...
    ```
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from historykit._messages import Message
from historykit.errors import ArgumentTypeError, InvalidArgumentError

BUILTIN_PACKAGES: tuple[str, ...] = ("historykit.plugins.pydantic_ai", "historykit.plugins.langchain")
"""The framework packages shipped with historykit, imported (cheaply) on the first lookup."""

SummarizerFn = Callable[..., Awaitable[str]]
"""What `Framework.summarizer` returns: a summarizer of `Summarize` (neutral messages in, the
summary text out), awaited."""


class Adapter(Protocol):
    """Converts one framework's native messages to neutral ones and back."""

    framework: str
    """Short name shown in reports and errors: `pydantic-ai`, `langchain` or `neutral`."""

    def to_neutral(self, messages: Sequence[Any]) -> list[Message]:
        """Neutral messages for a native history; `TypeError` naming the index of a non-message."""
        ...

    def to_native(self, messages: Sequence[Message]) -> list[Any]:
        """A native history; untouched messages are returned as their original objects."""
        ...


@runtime_checkable
class Framework(Protocol):
    """What one agent framework tells the core: everything that depends on its types.

    Implementations decide ownership from a class's module name, so that a framework that is not
    installed (or not used) is never imported. Methods for what a framework does not offer raise
    `InvalidArgumentError` (`read_transcript`, `write_transcript`, `pin`) or return `None`.

    Example:
        ```python
        from historykit.plugins import register

        class ToyFramework:
            name = "toy"
            title = "Toy"
            format = None

            def owns(self, cls: type) -> bool:
                return cls.__module__.startswith("toy.")
            ...

        register(ToyFramework())
        ```
    """

    @property
    def name(self) -> str:
        """Short name shown in reports and errors (`Adapter.framework` of its adapter)."""
        ...

    @property
    def title(self) -> str:
        """The framework's name as its users write it (`Pydantic AI`), for error messages."""
        ...

    @property
    def format(self) -> str | None:
        """The transcript format (`historykit.formats.FORMATS`) its native JSON is, or `None`."""
        ...

    def owns(self, cls: type) -> bool:
        """Whether `cls` is one of its message classes (decided without importing the framework)."""
        ...

    def adapter(self) -> Adapter:
        """Its message adapter."""
        ...

    def reported_tokens(self, message: Any) -> int | None:
        """Input plus output tokens the provider reported on a native response; `None` if none."""
        ...

    def read_transcript(self, path: Path) -> tuple[list[Any], list[Message]]:
        """The native messages of a file in its `format`, and their neutral view."""
        ...

    def write_transcript(self, messages: Sequence[Any], path: Path) -> None:
        """Write native (or neutral, converted) messages to a file in its `format`."""
        ...

    def pin(self, obj: Any) -> Any:
        """A pinned copy of one of its native messages or parts (`historykit.pin`)."""
        ...

    def summarizer(self, model: Any, budget_tokens: int) -> SummarizerFn | None:
        """A summarizer running `model` if it is one of its models (or model names); else `None`."""
        ...


def _type_name(obj: object) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


class NeutralAdapter:
    """The identity adapter, for histories that are already neutral."""

    framework = "neutral"

    def to_neutral(self, messages: Sequence[Any]) -> list[Message]:
        for index, msg in enumerate(messages):
            if not isinstance(msg, Message):
                raise ArgumentTypeError(
                    f"message {index} is a {_type_name(msg)}, but message 0 is a historykit Message: "
                    "a history must come from one framework"
                )
        return list(messages)

    def to_native(self, messages: Sequence[Message]) -> list[Any]:
        return list(messages)


class NeutralFramework:
    """historykit's own `Message`: the framework of neutral histories (always registered)."""

    name = "neutral"
    title = "historykit"
    format = None

    def owns(self, cls: type) -> bool:
        return issubclass(cls, Message)

    def adapter(self) -> Adapter:
        return NeutralAdapter()

    def reported_tokens(self, message: Any) -> int | None:
        usage = message.usage
        return usage.input_tokens + usage.output_tokens if usage and usage.input_tokens else None

    def read_transcript(self, path: Path) -> tuple[list[Any], list[Message]]:
        raise InvalidArgumentError("neutral messages have no native transcript format")

    def write_transcript(self, messages: Sequence[Any], path: Path) -> None:
        raise InvalidArgumentError("neutral messages have no native transcript format")

    def pin(self, obj: Any) -> Any:
        raise InvalidArgumentError("pin a neutral message with historykit.pin")

    def summarizer(self, model: Any, budget_tokens: int) -> SummarizerFn | None:
        return None


_NEUTRAL = NeutralFramework()
_registered: dict[str, Framework] = {_NEUTRAL.name: _NEUTRAL}
_framework_of_type: dict[type, Framework | None] = {}
_builtins = "not loaded"
_loading = threading.RLock()
"""Held while the built-in packages are imported: a lookup in another thread waits for them all
(a partial registry would cache a built-in framework's types as nobody's)."""


def register(framework: Framework) -> None:
    """Make `framework` known to the core; a framework of the same `name` is replaced.

    A framework package calls this when it is imported. Raises `ArgumentTypeError` for an object
    that does not have the `Framework` methods.
    """
    if not isinstance(framework, Framework):
        raise ArgumentTypeError(f"expected a historykit Framework, got a {_type_name(framework)}")
    # No lock here: a package may register while another thread holds `_loading` and waits to
    # import that very package. Each assignment is atomic.
    _registered[framework.name] = framework
    # Ownership of a type may change with a new framework: look every type up again.
    _framework_of_type.clear()


def frameworks() -> list[Framework]:
    """The registered frameworks: neutral, the built-in ones (in `BUILTIN_PACKAGES` order), then
    the others in the order they registered; the order lookups ask them in."""
    _load_builtins()
    return sorted(_registered.values(), key=_rank)


def _rank(framework: Framework) -> int:
    if framework is _NEUTRAL:
        return -1
    module = type(framework).__module__
    for index, package in enumerate(BUILTIN_PACKAGES):
        if module == package or module.startswith(package + "."):
            return index
    return len(BUILTIN_PACKAGES)  # sorted() is stable: registration order among the others


def _load_builtins() -> None:
    global _builtins
    if _builtins == "loaded":
        return
    with _loading:
        # "loading": this thread is importing them now (the lock is reentrant), and a package it
        # imports asks again.
        if _builtins != "not loaded":
            return
        _builtins = "loading"
        try:
            for package in BUILTIN_PACKAGES:
                importlib.import_module(package)
        finally:
            _builtins = "loaded"


def framework_of(cls: type) -> Framework | None:
    """The registered framework that owns the class `cls`; `None` if none does."""
    # Looked up once per type: this runs for every message of every history counted or processed.
    try:
        return _framework_of_type[cls]
    except KeyError:
        pass
    found = next((f for f in frameworks() if f.owns(cls)), None)
    _framework_of_type[cls] = found
    return found


def framework_for_format(fmt: str) -> Framework:
    """The framework whose native JSON is the transcript format `fmt`; `InvalidArgumentError` if none."""
    for framework in frameworks():
        if framework.format == fmt:
            return framework
    raise InvalidArgumentError(f"no registered framework reads the {fmt!r} format")


def _framework_names() -> str:
    titles = [f.title for f in frameworks() if f is not _NEUTRAL]
    return ", ".join(titles) + " or historykit" if titles else "historykit"


def history_framework(messages: Sequence[Any]) -> Framework:
    """The one framework all of `messages` come from.

    Raises `ArgumentTypeError` (a `TypeError`) naming the first item that does not fit.
    """
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise ArgumentTypeError(f"expected a list of messages, got a {_type_name(messages)}")
    # A history holds a few message classes: look each up once (the loop below names a misfit).
    owners = {framework_of(cls) for cls in set(map(type, messages))}
    if len(owners) == 1 and (only := next(iter(owners))) is not None:
        return only
    first: Framework | None = None
    for index, msg in enumerate(messages):
        framework = framework_of(type(msg))
        if framework is None:
            raise ArgumentTypeError(
                f"message {index} is a {_type_name(msg)}, not a {_framework_names()} message"
            )
        if first is None:
            first = framework
        elif framework is not first:
            raise ArgumentTypeError(
                f"message {index} is a {_type_name(msg)} ({framework.name}), but message 0 is a "
                f"{first.name} message: a history must come from one framework"
            )
    return first if first is not None else _NEUTRAL


def adapter_for(messages: Sequence[Any]) -> Adapter:
    """The adapter for `messages`; `ArgumentTypeError` (a `TypeError`) names an item that does not fit."""
    return history_framework(messages).adapter()
