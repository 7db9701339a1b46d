"""Hypothesis strategies for valid neutral histories, shared by the checker and processor tests.

`neutral_histories()` draws histories that satisfy every provider rule: an optional system prompt,
a first user message (the task), then turns of assistant steps (text, thinking signed or not,
single and parallel tool calls in the corpus's tool shapes: `Read`, `Write`, `Edit`, editor
`view`, shell `cat`/`sed -n`), each call answered right after it (one tool message per result or
all results in one message), and some pinned messages. The history ends with a user message, with
tool results (the final request) or with a final assistant answer.
"""

from __future__ import annotations

import random

from hypothesis import settings
from hypothesis import strategies as st

from historykit._messages import Message, Part, TextPart, ThinkingPart, ToolCallPart, ToolResultPart

__all__ = ["examples", "neutral_histories"]

_DEFAULT_MAX_EXAMPLES = 100
"""Hypothesis's own default budget: a profile's `max_examples` over it scales every test's budget."""


def examples(budget: int, *, at_least: int = 10) -> int:
    """A property test's `max_examples`: `budget` in the default profile, scaled by the loaded
    profile (`tests/conftest.py`: half in `ci`, ten times in `thorough`), never under `at_least`.

    A test's own `max_examples` would win over any profile; through this, the profile still decides.
    """
    scaled = round(budget * settings.default.max_examples / _DEFAULT_MAX_EXAMPLES)
    return max(scaled, min(at_least, budget))


PATHS = ("src/app.py", "./src/app.py", "src/util/io.py", "README.md", "tests/test_app.py", "setup.cfg")
WORDS = ("def", "return", "import", "class", "self", "value", "error", "test", "path", "None", "assert", "=")
CONSTRAINTS = (
    "You must never modify files under tests/.",
    "Only use the standard library.",
    "Always run the test suite before finishing.",
)


def _text(draw: st.DrawFn, max_lines: int = 40) -> str:
    """1 to `max_lines` lines of 1 to 12 of `WORDS`: the number of lines and each line's length
    drawn (they shrink), the words picked by a drawn seed. Drawing each word (as this did) made
    drawing a history most of a property test's time, for texts of the same sizes and words."""
    lengths = draw(st.lists(st.integers(1, 12), min_size=1, max_size=max_lines))
    pick = random.Random(draw(st.integers(0, 2**16))).choice
    return "\n".join(" ".join(pick(WORDS) for _ in range(length)) for length in lengths)


def _tool_call(draw: st.DrawFn, call_id: str) -> ToolCallPart:
    path = draw(st.sampled_from(PATHS))
    shape = draw(st.sampled_from(("read", "cat", "sed", "view", "write", "edit", "grep")))
    if shape == "read":
        return ToolCallPart(call_id, "Read", {"file_path": path})
    if shape == "cat":
        return ToolCallPart(call_id, "bash", {"command": f"cat {path}"})
    if shape == "sed":
        start = draw(st.integers(1, 50))
        return ToolCallPart(call_id, "bash", {"command": f"sed -n '{start},{start + 30}p' {path}"})
    if shape == "view":
        return ToolCallPart(call_id, "str_replace_editor", {"command": "view", "path": path})
    if shape == "write":
        return ToolCallPart(call_id, "Write", {"file_path": path, "content": _text(draw)})
    if shape == "edit":
        return ToolCallPart(
            call_id, "Edit", {"file_path": path, "old_string": _text(draw, 5), "new_string": _text(draw, 5)}
        )
    return ToolCallPart(call_id, "Grep", {"pattern": draw(st.sampled_from(WORDS))})


@st.composite
def neutral_histories(draw: st.DrawFn, max_turns: int = 5, max_steps: int = 4) -> list[Message]:
    """A valid neutral history (see the module docstring)."""
    counter = iter(range(10_000))
    messages: list[Message] = []
    if draw(st.booleans()):
        messages.append(Message("system", (TextPart("You are a careful coding agent. " + _text(draw, 3)),)))
    task = "Fix the bug in src/app.py. " + (draw(st.sampled_from(CONSTRAINTS)) if draw(st.booleans()) else "")
    messages.append(Message("user", (TextPart(task),), pinned=draw(st.booleans())))
    turns = draw(st.integers(1, max_turns))
    for turn in range(turns):
        if turn:
            messages.append(Message("user", (TextPart(_text(draw, 3)),), pinned=draw(st.integers(0, 9)) == 0))
        steps = draw(st.integers(1, max_steps))
        for step in range(steps):
            last_step = turn == turns - 1 and step == steps - 1
            parts: list[Part] = []
            if draw(st.booleans()):
                signed = draw(st.booleans())
                parts.append(
                    ThinkingPart(_text(draw, 4), signature=f"sig{next(counter)}" if signed else None)
                )
            if draw(st.booleans()):
                parts.append(TextPart(_text(draw, 3)))
            n_calls = draw(st.integers(0 if last_step else 1, 3))
            calls = [_tool_call(draw, f"call_{next(counter)}") for _ in range(n_calls)]
            parts.extend(calls)
            if not parts:
                parts.append(TextPart("Done."))
            messages.append(Message("assistant", tuple(parts)))
            if not calls:
                continue
            results = [
                ToolResultPart(c.id, c.name, _text(draw), pinned=draw(st.integers(0, 19)) == 0) for c in calls
            ]
            if draw(st.booleans()):
                messages.append(Message("tool", tuple(results)))
            else:
                messages.extend(Message("tool", (r,)) for r in results)
    if draw(st.booleans()) and messages[-1].role == "assistant":
        messages.append(Message("user", (TextPart("Thanks. " + _text(draw, 2)),)))
    return messages
