"""Malformed input is a clear historykit error naming what is wrong, or passes through untouched;
nonsense configuration is refused (issue 24).

The histories are real Pydantic AI and LangChain messages; the malformed ones are built the way a
user gets them past the frameworks' own checks (an attribute set after construction, LangChain's
`model_construct`), or are shapes the frameworks accept (a 3,000-deep argument dict, an unknown
part, a lone surrogate). Each goes through `default_pipeline()` with a window small enough that
every stage works on it.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from pydantic_ai import messages as pai

from historykit.errors import ArgumentTypeError, HistoryKitError, InvalidArgumentError
from historykit.processors._default_pipeline import default_pipeline
from historykit.processors._summarize import Summarize
from historykit.processors._trigger import Trigger

WINDOW = 4_000


def _deep(levels: int) -> dict[str, Any]:
    root: dict[str, Any] = {}
    node = root
    for _ in range(levels):
        node["a"] = {}
        node = node["a"]
    return root


def _filler(framework: str, turns: int = 12) -> list[Any]:
    """Tool turns with long results, so the pipeline has work to do around the malformed message."""
    out: list[Any] = []
    for n in range(turns):
        text = f"line {n}\n" * 120
        if framework == "pydantic-ai":
            out.append(pai.ModelResponse(parts=[pai.ToolCallPart("read", {"path": f"f{n}.py"}, f"r{n}")]))
            out.append(pai.ModelRequest(parts=[pai.ToolReturnPart("read", text, f"r{n}")]))
        else:
            out.append(
                AIMessage("", tool_calls=[{"name": "read", "args": {"path": f"f{n}.py"}, "id": f"r{n}"}])
            )
            out.append(ToolMessage(text, tool_call_id=f"r{n}"))
    return out


def _pai_task(text: str = "Fix the bug") -> pai.ModelRequest:
    return pai.ModelRequest(parts=[pai.UserPromptPart(text)])


def _pai_call(args: Any, returned: Any = "ok") -> list[Any]:
    return [
        pai.ModelResponse(parts=[pai.ToolCallPart("edit", args, "c1")]),
        pai.ModelRequest(parts=[pai.ToolReturnPart("edit", returned, "c1")]),
    ]


def _lc_call(args: Any, returned: Any = "ok") -> list[Any]:
    call = {"name": "edit", "args": args, "id": "c1", "type": "tool_call"}
    return [
        AIMessage.model_construct(
            content="", tool_calls=[call], invalid_tool_calls=[], additional_kwargs={}, response_metadata={}
        ),
        ToolMessage.model_construct(
            content=returned, tool_call_id="c1", status="success", additional_kwargs={}, response_metadata={}
        ),
    ]


def _with_none_parts() -> list[Any]:
    request = _pai_task()
    request.parts = None  # type: ignore[assignment]
    return [request]


def _with_none_prompt() -> list[Any]:
    request = _pai_task()
    request.parts[0].content = None  # type: ignore[union-attr]
    return [request]


class Unserializable:
    """An object no serializer knows (a tool returning a live client, a lock, a socket)."""


def _lc_ai(**fields: Any) -> AIMessage:
    base: dict[str, Any] = {
        "content": "",
        "tool_calls": [],
        "invalid_tool_calls": [],
        "additional_kwargs": {},
        "response_metadata": {},
    }
    return AIMessage.model_construct(**{**base, **fields})


# name -> (history, expected error class, words the message must hold)
MALFORMED: dict[str, tuple[Any, type[HistoryKitError], tuple[str, ...]]] = {
    "pai parts=None": (
        _with_none_parts,
        ArgumentTypeError,
        ("message 0", "ModelRequest", "parts", "NoneType"),
    ),
    "pai UserPromptPart(content=None)": (
        _with_none_prompt,
        ArgumentTypeError,
        ("message 0", "UserPromptPart.content", "NoneType"),
    ),
    "pai list args": (
        lambda: [_pai_task(), *_pai_call([1, 2])],
        ArgumentTypeError,
        ("message 1", "arguments", "list"),
    ),
    "pai deep args": (
        lambda: [_pai_task(), *_pai_call(_deep(3_000))],
        InvalidArgumentError,
        ("'c1'", "edit", "nested too deeply"),
    ),
    "pai object in a tool return": (
        lambda: [_pai_task(), *_pai_call({}, Unserializable())],
        ArgumentTypeError,
        ("message 2", "tool 'edit'", "'c1'", "Unserializable"),
    ),
    "lc content=None": (
        lambda: [HumanMessage("Fix the bug"), _lc_ai(content=None)],
        ArgumentTypeError,
        ("message 1", "AIMessage", "content", "NoneType"),
    ),
    "lc tool_calls=None": (
        lambda: [HumanMessage("Fix the bug"), _lc_ai(content="done", tool_calls=None)],
        ArgumentTypeError,
        ("message 1", "tool_calls", "NoneType"),
    ),
    "lc list args": (
        lambda: [HumanMessage("Fix the bug"), *_lc_call([1, 2])],
        ArgumentTypeError,
        ("message 1", "'c1'", "args", "list"),
    ),
    "lc deep args": (
        lambda: [HumanMessage("Fix the bug"), *_lc_call(_deep(3_000))],
        InvalidArgumentError,
        ("'c1'", "edit", "nested too deeply"),
    ),
    "lc object in a tool message": (
        lambda: [HumanMessage("Fix the bug"), *_lc_call({}, Unserializable())],
        ArgumentTypeError,
        ("message 2", "ToolMessage", "content", "Unserializable"),
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
@pytest.mark.parametrize("where", ["before", "after"])
def test_malformed_input_is_a_clear_error(case: str, where: str) -> None:
    make, error, words = MALFORMED[case]
    framework = "pydantic-ai" if case.startswith("pai") else "langchain"
    history = make()
    # The malformed message first, then after a run of ordinary turns (indices shift: checked as words).
    if where == "after":
        history = [history[0], *_filler(framework), *history[1:]]
        words = tuple(w for w in words if not w.startswith("message "))
    with pytest.raises(error) as caught:
        default_pipeline().run(history, context_window=WINDOW)
    message = str(caught.value)
    for word in words:
        assert word in message, (word, message)
    assert "\n" not in message


class UnknownPart:
    """A part type neither framework knows (a newer framework's part, a user's own)."""

    part_kind = "unknown"


def _unknown_pai() -> list[Any]:
    return [
        pai.ModelRequest(parts=[pai.UserPromptPart("Fix the bug"), UnknownPart()]),
        *_filler("pydantic-ai"),
    ]  # type: ignore[list-item]


def _surrogate_pai() -> list[Any]:
    return [_pai_task("Fix the bug \ud800 in src/app.py"), *_filler("pydantic-ai")]


def _surrogate_lc() -> list[Any]:
    return [HumanMessage("Fix the bug \udfff in src/app.py"), *_filler("langchain")]


def _unknown_block_lc() -> list[Any]:
    task = HumanMessage(content=[{"type": "text", "text": "Fix the bug"}, {"type": "hologram", "data": 7}])
    return [task, *_filler("langchain")]


PASS_THROUGH = {
    "pai unknown part": _unknown_pai,
    "pai lone surrogate": _surrogate_pai,
    "lc lone surrogate": _surrogate_lc,
    "lc unknown block": _unknown_block_lc,
}


@pytest.mark.parametrize("case", sorted(PASS_THROUGH))
def test_what_the_frameworks_accept_passes_through_untouched(case: str) -> None:
    history = PASS_THROUGH[case]()
    result = default_pipeline().run(history, context_window=WINDOW)
    assert result.report.tokens_after < result.report.tokens_before  # the pipeline did work
    assert result.messages[0] is history[0]  # the odd message is the original object


@pytest.mark.parametrize(
    ("build", "words"),
    [
        (lambda: Trigger(max_fraction="0.5"), ("max_fraction", "'0.5'")),
        (lambda: Trigger(max_fraction=0.5, low_water="half"), ("low_water", "'half'")),
        (lambda: Trigger(reserve=10**30), ("reserve", "at most")),
        (lambda: Trigger(max_tokens=10**30), ("max_tokens", "at most")),
        (lambda: Summarize(summary_tokens=0), ("summary_tokens", "got 0")),
        (
            lambda: default_pipeline().run([HumanMessage("hi")], context_window=10**30),
            ("context_window", "at most"),
        ),
    ],
    ids=[
        "max_fraction str",
        "low_water str",
        "reserve 1e30",
        "max_tokens 1e30",
        "summary_tokens 0",
        "window 1e30",
    ],
)
def test_nonsense_configuration_is_refused(build: Any, words: tuple[str, ...]) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        build()
    for word in words:
        assert word in str(caught.value)


@pytest.mark.parametrize("persist", ["no", "False", 0, 1, None])
def test_persist_takes_a_bool_only(persist: Any) -> None:
    from historykit.plugins.langchain import HistoryKitHook, HistoryKitMiddleware
    from historykit.plugins.pydantic_ai import HistoryKit

    for make in (HistoryKitMiddleware, HistoryKitHook, HistoryKit):
        with pytest.raises(InvalidArgumentError, match=f"persist must be True or False, got {persist!r}"):
            make(default_pipeline(), persist=persist)


def test_the_largest_real_windows_are_still_accepted() -> None:
    result = default_pipeline().run([HumanMessage("hi")], context_window=10_000_000)
    assert result.report.context_window == 10_000_000
    assert Trigger(reserve=40_000, max_tokens=2_000_000).mark(10_000_000) == 2_000_000
