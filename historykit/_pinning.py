"""`pin(obj)`: mark a message or a part so that every processor keeps it verbatim.

Pin what must survive any compaction: safety rules, the user's hard constraints, a spec the agent
must keep reading. Pinning returns a pinned copy and never changes its argument (messages are
treated as immutable everywhere in historykit). The pin is a plain metadata flag, so it survives
serialization: Pydantic AI's `ModelMessagesTypeAdapter`, LangChain's `messages_to_dict` and the
historykit stores.

Where the copy carries the pin:
- a neutral `Message` or part: its `pinned` field;
- a LangChain message: `additional_kwargs[PIN_KEY] = True`, with the same `id` (so `add_messages`
  replaces the original in graph state);
- a Pydantic AI `ModelRequest` / `ModelResponse`, or a part or user content item with a `metadata`
  field (`ToolReturnPart`, `TextContent`, in 2.x `SystemPromptPart`, ...): `metadata[PIN_KEY] = True`.

A Pydantic AI part without a `metadata` field (a `UserPromptPart`, a response's `TextPart`) cannot
carry a pin: pin its message, or, for a user prompt, pin `TextContent` items. No framework is
imported unless the object is one of its messages.

Example:
    ```python
    from langchain_core.messages import HumanMessage
    from historykit import pin

    rules = pin(HumanMessage("Never modify files under tests/.", id="rules"))
    graph.invoke({"messages": [rules]}, config)

    from pydantic_ai.messages import TextContent
    result = agent.run_sync([pin(TextContent("Only use the standard library.")), "Fix the bug."])
    ```
"""

from __future__ import annotations

import dataclasses
from typing import TypeVar

from historykit._frameworks import framework_of
from historykit._messages import Message, Part
from historykit.errors import ArgumentTypeError

T = TypeVar("T")

_NEUTRAL_PARTS: tuple[type, ...] = Part.__args__  # type: ignore[attr-defined]


def pin(obj: T) -> T:
    """A pinned copy of a neutral, LangChain or Pydantic AI message or part; `ArgumentTypeError` (a
    `TypeError`) for anything else.

    Example:
        ```python
        from historykit import pin
        from historykit import Message

        rules = pin(Message.user("Never push to main."))
        assert rules.pinned
        ```
    """
    if isinstance(obj, (Message, *_NEUTRAL_PARTS)):
        return dataclasses.replace(obj, pinned=True)  # type: ignore[type-var]
    framework = framework_of(type(obj))
    if framework is not None and framework.name != "neutral":
        return framework.pin(obj)  # type: ignore[no-any-return]
    raise ArgumentTypeError(
        f"cannot pin a {_type_name(obj)}: pin a historykit Message or part, a LangChain message, "
        "or a Pydantic AI message or part"
    )


def _type_name(obj: object) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"
