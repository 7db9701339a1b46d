"""Thinking binding: which models bind replayed thinking to the history, and what that costs an edit.

Since Claude Fable 5.1, some Claude models accept a replayed `thinking` / `redacted_thinking` block
only if everything before it (the system prompt, the tools, every earlier message, earlier thinking
included) is exactly what was sent when the block was produced (`docs/provider-rules.md`, R13).
Change anything at position k and every thinking block after k is invalid: the request is rejected
with a 400 ("The block is bound to a different conversation").

So a history processor serving such a model may still edit, but every edit at position k drops
all thinking after k in the same call, the current tool-use cycle's included. That is what
`drop_unbound_thinking` does; the pipeline runs it after its processors whenever the model binds.
On every other model the opposite rule stands (R7): the current cycle's thinking is kept byte for
byte.

Whether a model binds is known, in order, from: an explicit `binds_thinking=` (on `Pipeline.run`
and every integration); Pydantic AI's model profile flag `anthropic_binds_thinking_blocks`; the
model name (of the model handed to an integration, or recorded on the assistant messages):
`model_binds_thinking`. `BINDING_MODELS` is the one list of such models.

Example:
    ```python
    from historykit._binding import model_binds_thinking

    model_binds_thinking("claude-opus-5-5-20261001")         # True
    model_binds_thinking("anthropic:claude-sonnet-5-5")      # True (provider prefixes are ignored)
    model_binds_thinking("claude-sonnet-4-5")                # False
    ```
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from historykit._messages import Message, ThinkingPart

BINDING_MODELS: tuple[str, ...] = (
    "claude-fable-5-1",
    "claude-fable-5-2",
    "claude-mythos-5-2",
    "claude-opus-5-5",
    "claude-sonnet-5-5",
    "claude-haiku-5-5",
)
"""Model-name prefixes of the models that bind thinking (Anthropic's Claude API, Bedrock, Vertex and
Foundry names alike, once provider prefixes are removed and dots read as dashes). Claude Mythos 5.1
does not run the check, which is why the list names versions and not families."""

# `anthropic:claude-…`, `bedrock/…`, `us.anthropic.claude-…`, `projects/…/claude-…@2026…`: the
# Claude model name is what follows the last separator before `claude-`.
_CLAUDE = re.compile(r"claude-[a-z0-9.\-@]*", re.IGNORECASE)


def model_binds_thinking(name: str | None) -> bool:
    """True when the model named `name` binds replayed thinking to the history (R13).

    Provider and deployment prefixes are ignored, dots count as dashes (`claude-opus-5.5`).
    `None` or a name that is not a binding Claude model: False.
    """
    if not name:
        return False
    found = _CLAUDE.search(name)
    if found is None:
        return False
    bare = found.group(0).lower().replace(".", "-")
    return bare.startswith(BINDING_MODELS)


def history_binds_thinking(messages: Sequence[Message]) -> bool:
    """True when the latest assistant message that names its model names a binding one.

    The latest model is the one the next call most likely goes to; a history with no model names
    (a transcript, a hand-built list) does not bind.
    """
    for msg in reversed(messages):
        if msg.role == "assistant" and msg.model:
            return model_binds_thinking(msg.model)
    return False


def first_edit(before: Sequence[Message], after: Sequence[Message]) -> int:
    """The first position where `after` is not `before` (by identity): where an edit begins.

    `len(before)` when `after` only appends to `before`: processors hand untouched messages back as
    the very same objects, so identity is exact and costs nothing.
    """
    for index, (old, new) in enumerate(zip(before, after)):
        if old is not new:
            return index
    return min(len(before), len(after))


@dataclass
class ThinkingDrop:
    """What `drop_unbound_thinking` dropped."""

    edit_at: int
    """Where the first edit is: the thinking after it was bound to a prefix that changed."""
    blocks: int = 0
    """Thinking blocks dropped."""
    messages_removed: int = 0
    """Assistant messages that held nothing but thinking, and went with it."""


def drop_unbound_thinking(
    before: Sequence[Message], after: list[Message]
) -> tuple[list[Message], ThinkingDrop]:
    """`after` without the thinking that an edit of `before` made invalid on a binding model.

    Every thinking block in an assistant message past the first edit goes (`first_edit`): it was
    produced under a prefix that is no longer the one sent. A message left with nothing but empty
    text goes too (an empty assistant message is itself rejected, R6). Pinned thinking is no
    exception: the provider would reject it. Returns `after` itself when nothing was dropped.
    """
    at = first_edit(before, after)
    drop = ThinkingDrop(at)
    out = list(after[:at])
    for msg in after[at:]:
        kept = tuple(p for p in msg.parts if not isinstance(p, ThinkingPart))
        if msg.role != "assistant" or len(kept) == len(msg.parts):
            out.append(msg)
            continue
        drop.blocks += len(msg.parts) - len(kept)
        if any(p.kind != "text" or getattr(p, "text", "").strip() for p in kept):
            out.append(replace(msg, parts=kept))
        else:
            drop.messages_removed += 1
    return (after, drop) if not drop.blocks else (out, drop)


def restore_cycle_thinking(before: Sequence[Message], after: list[Message]) -> tuple[list[Message], int]:
    """On a model that does not bind thinking: give back the current cycle's thinking (R7).

    The last assistant turn of a tool-use cycle must reach the provider with its thinking first and
    unmodified. Processors never strip the current cycle's thinking, but one edit can make another
    one's work the current cycle: a truncation that keeps an older pinned exchange right before the
    final request makes that exchange's assistant message the cycle's, and its thinking may have
    gone when it was old. Such a message gets its thinking back from `before` (matched by its tool
    calls, else by its text), in front of whatever else it holds now. Returns the history and how
    many messages got their thinking back.
    """
    from historykit._validity import current_cycle_start

    start = current_cycle_start(after)
    if start >= len(after):
        return after, 0
    originals: dict[tuple[str, ...], Message] = {}
    for msg in before:
        if msg.role == "assistant" and any(isinstance(p, ThinkingPart) for p in msg.parts):
            originals[_identity(msg)] = msg
    out: list[Message] | None = None
    restored = 0
    for index in range(start, len(after)):
        msg = after[index]
        if msg.role != "assistant" or any(isinstance(p, ThinkingPart) for p in msg.parts):
            continue
        original = originals.get(_identity(msg))
        if original is None:
            continue
        thinking = tuple(p for p in original.parts if isinstance(p, ThinkingPart))
        if out is None:
            out = list(after)
        out[index] = replace(msg, parts=(*thinking, *msg.parts))
        restored += 1
    return (after, 0) if out is None else (out, restored)


def _identity(msg: Message) -> tuple[str, ...]:
    """What tells an assistant message from the others once its thinking is gone: its tool-call ids,
    or, with none, its text."""
    calls = tuple(p.id for p in msg.parts if p.kind == "tool_call")  # type: ignore[union-attr]
    return calls or ("text", msg.text)
