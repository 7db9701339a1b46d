"""`ClearMedia`: keep the newest images in the request and replace older ones by a short text.

Browser and computer-use agents take a screenshot at every step, and every request sends every
screenshot taken so far: a 60-step session sends 60 images on its last call, of which the model
needs the last few. An image costs about as many tokens as a page of text whatever it shows, and
its bytes travel with every request (`benchmarks/bench_media.py`).

`ClearMedia` keeps the newest `keep` images (counted in message order, in user messages and in
tool results alike) and replaces each older one, in place, by a one-line text that says what was
there: `[image removed from the request to save context: image/png, 98 KB, returned by
screenshot(url='https://example.com')]`. The tool result keeps its text and its place, so every
call keeps its result and the history stays valid. With `max_bytes`, any image or file bigger than
that (a PDF, a full-page capture) goes too, once it is no longer part of the current request.

What it never touches: the current request (the messages after the last assistant message: the
tool results the model is about to read, or the user's newest message), the user's latest request
(the task and the mockup that came with it, however many tool calls ago), pinned messages, parts and
media, and anything the model itself produced (images in assistant messages). Placeholders depend
only on the media they replace and the call that returned it, so the same history always gives the
same output, in view-only and persistent mode alike.

The originals are not lost: view-only mode keeps the raw history, and persistent mode's stores keep
every original message in their transcript (`SQLModelSaver.transcript`,
`SQLModelConversationStore.transcript`). With the recall tool installed (`historykit.Recall`,
`recall_tool`), a placeholder ends with `recall(handle='3f9a0c1b2d') shows it again`, and the tool
returns the image itself (a Pydantic AI `BinaryContent` or `ImageUrl`, a LangChain image block),
found in the conversation's history (view-only mode) or in the store's transcript
(`Recall(store=...)`). In persistent mode without a store the image is nowhere to be found again,
so the integrations do not install the tool on `ClearMedia` there (`Recall.install(media=False)`)
and its placeholders name no handle.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from historykit._messages import MediaPart, Message, Part, TextPart, ToolCallPart, ToolResultPart
from historykit._pipeline import HistoryProcessor, ProcessContext, StepNotes
from historykit._recall import check_recall_tool, media_handle, recall_call
from historykit._scan_memo import MessageFacts
from historykit._validate import check_int
from historykit.errors import InvalidArgumentError
from historykit.processors._clear_tool_results import describe_call
from historykit.processors._turns import is_user_request

PLACEHOLDER = "[{kind} removed from the request to save context: {what}, {where}]"
"""What a removed image or file reads in the request."""
RECALL_PLACEHOLDER = (
    "[{kind} removed from the request to save context: {what}, {where}; {recall} shows it again]"
)
"""What it reads when the recall tool is installed: `{recall}` is `recall(handle='3f9a0c1b2d')`, the
handle being the image's (`historykit._recall.media_handle`)."""
_KINDS = {"image": "image", "audio": "audio clip", "video": "video"}


@dataclass
class ClearMedia(HistoryProcessor):
    """Keeps the newest `keep` images in the request; older ones (and, with `max_bytes`, any image
    or file over that size) are replaced by a one-line placeholder saying what was there.

    A removed screenshot reads `[image removed from the request to save context: image/png, 98 KB,
    returned by screenshot(url='https://example.com')]`; one the user sent reads `[... image/jpeg,
    1.2 MB, sent by the user]`. The placeholder takes the image's place in its message, so the tool
    result, its call and the message around it stay as they were.

    Counted: every image in user messages and tool results, in message order (images a tool
    returned and images a user sent alike, the current request's included), except pinned ones and
    those of the user's latest request while the model is still working on it (its attachments are
    the task's: they are counted, and the oldest, once the user writes again). Never removed: the
    current request (the messages after the last assistant message), the user's latest request,
    pinned messages, tool results and media, and assistant messages. Pin an image the agent must
    keep seeing (the mockup it is to reproduce) with `historykit.pin`.

    When: whenever `keep + batch` images are in the history, the oldest `batch` go (in steps of
    `batch`), so between two removals the request only grows by appending. Why batches: a removal
    changes the request from the removed image on, which the provider's prompt cache then misses
    (and, on a model that binds thinking, costs the thinking after it). Measured on a generated
    60-screenshot browser session (`benchmarks/bench_media.py`, ~100 KB PNGs): the last request falls
    from 8.1 MB to 0.5-0.8 MB and from 84,073 to 8-11k tokens (Anthropic's rate); the whole session's
    input priced with prompt caching costs 83% of sending every screenshot with `batch=1`, 55% with
    `batch=3` and 50% with `batch=5` (the default), 51% with `batch=10`.

    A history without images (or with no more than `keep` and none over `max_bytes`) comes back as
    the very same list: `default_pipeline()` runs it first, so it changes nothing for text-only
    agents.

    Example:
        ```python
        from historykit.processors import ClearMedia

        clear = ClearMedia(keep=3, max_bytes=2_000_000)
        result = clear.run(messages, context_window=200_000)   # native messages in and out
        ```
    """

    keep: int = 3
    """How many of the newest images stay in the request (the current request's always stay)."""
    max_bytes: int | None = None
    """Also remove any image or file whose inline payload is bigger than this many bytes, once it is
    out of the current request, even among the newest `keep`; `None`: no size limit."""
    replaces_media: ClassVar[bool] = True
    """Its placeholders stand for images: `Recall.install(media=False)` leaves it without the tool."""
    batch: int = 5
    """Remove images in steps of this many: with `keep=3` and `batch=5`, between 3 and 7 images stay
    and the older ones go five at a time, so the request changes once every five screenshots and is
    append-only in between (the provider's prompt cache keeps hitting); `batch=1` keeps exactly
    `keep`, and changes the request at every new screenshot."""
    recall_tool: str | None = None
    """The name of the recall tool, when the integration installed one that can give images back
    (`historykit.Recall`): a placeholder then names it with the image's handle."""

    def __post_init__(self) -> None:
        check_int("keep", self.keep)
        check_int("max_bytes", self.max_bytes, optional=True)
        check_int("batch", self.batch)
        if self.batch < 1:
            raise InvalidArgumentError(f"batch must be at least 1, got {self.batch!r}")
        check_recall_tool(self.recall_tool)

    def process(self, messages: list[Message], ctx: ProcessContext) -> tuple[list[Message], StepNotes]:
        notes = StepNotes()
        media: MessageFacts[bool] = ctx.conversation.memory(self, MessageFacts)
        if not any(media.of(messages, _has_media)):
            # No image or file anywhere (whether each message has one is remembered for the
            # conversation, `historykit._scan_memo`): nothing to count or remove.
            return messages, notes
        current = _current_request(messages)
        latest = next((i for i in range(len(messages) - 1, -1, -1) if is_user_request(messages[i])), -1)
        # Every media item that may go, in order: (message, part, item within a tool result or -1).
        slots: list[tuple[int, int, int, MediaPart]] = []
        for index, msg in enumerate(messages):
            if msg.role == "assistant" or msg.pinned or (index == latest and index < current):
                # The latest request's attachments are the task's: not counted, not removed, until
                # the user writes again (then they are the oldest, and go first).
                continue
            for p, part in enumerate(msg.parts):
                if isinstance(part, MediaPart) and not part.pinned:
                    slots.append((index, p, -1, part))
                elif isinstance(part, ToolResultPart) and part.media and not part.pinned:
                    slots.extend(
                        (index, p, k, item)
                        for k, item in enumerate(part.media)
                        if isinstance(item, MediaPart) and not item.pinned
                    )
        images = [slot for slot in slots if slot[3].media_type.startswith("image")]
        # The current request's images are the newest: counted among the `keep`, never removed.
        over = len(images) - self.keep
        chosen = {id(slot) for slot in images[: (over // self.batch) * self.batch]} if over > 0 else set()
        if self.max_bytes is not None:
            chosen.update(id(slot) for slot in slots if slot[3].size > self.max_bytes)
        removed = [slot for slot in slots if id(slot) in chosen and slot[0] < current]
        if not removed:
            return messages, notes
        out = list(messages)
        by_message: dict[int, list[tuple[int, int, int, MediaPart]]] = {}
        for slot in removed:
            by_message.setdefault(slot[0], []).append(slot)
        for index, found in by_message.items():
            out[index] = self._cleared(messages, index, found)
        freed = sum(slot[3].size for slot in removed)
        notes.replaced = len(removed)
        notes.details.append(
            f"removed {len(removed)} image(s) or file(s) from the request ({_size(freed)} of payload); "
            f"kept the newest {min(self.keep, len(images))} image(s)"
        )
        return out, notes

    def _cleared(
        self, messages: list[Message], index: int, found: list[tuple[int, int, int, MediaPart]]
    ) -> Message:
        msg = messages[index]
        parts: list[Part] = list(msg.parts)
        for _, p, k, media in found:
            part = parts[p]
            if isinstance(part, ToolResultPart):
                where = f"returned by {_caller(messages, index, part)}"
                items = list(part.media)
                items[k] = TextPart(self._placeholder(media, where), native=media.native)
                parts[p] = replace(part, media=tuple(items))
            else:
                where = "sent by the user" if msg.role == "user" else f"in a {msg.role} message"
                parts[p] = TextPart(self._placeholder(media, where), native=media.native)
        return replace(msg, parts=tuple(parts))

    def _placeholder(self, media: MediaPart, where: str) -> str:
        kind = _KINDS.get(media.media_type.split("/", 1)[0], "file")
        what = media.media_type
        if media.size:
            what += f", {_size(media.size)}"
        elif media.source:
            what += f" at {media.source[:120]}"
        if self.recall_tool is None or not (media.digest or media.source):
            return PLACEHOLDER.format(kind=kind, what=what, where=where)
        recall = recall_call(self.recall_tool, media_handle(media))
        return RECALL_PLACEHOLDER.format(kind=kind, what=what, where=where, recall=recall)


def _has_media(msg: Message) -> bool:
    """Whether `msg` carries an image or a file (in a tool result too), pinned or not."""
    return any(
        isinstance(part, MediaPart) or (isinstance(part, ToolResultPart) and bool(part.media))
        for part in msg.parts
    )


def _current_request(messages: list[Message]) -> int:
    """Where the current request starts: after the last assistant message (0: all of it is)."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "assistant":
            return index + 1
    return 0


def _caller(messages: list[Message], index: int, result: ToolResultPart) -> str:
    """The call that returned `result`, as a placeholder names it: `screenshot(url='…')`."""
    for back in range(index - 1, -1, -1):
        if messages[back].role == "assistant":
            call = next((c for c in messages[back].tool_calls if c.id == result.tool_call_id), None)
            if call is not None:
                return describe_call(call)
            break
    return describe_call(ToolCallPart(result.tool_call_id, result.name or "a tool", {}))


def _size(size: int) -> str:
    """`98 KB`, `1.2 MB`: a payload's size as a person reads it (decimal units, as providers state limits)."""
    if size < 1_000:
        return f"{size} bytes"
    if size < 1_000_000:
        return f"{size / 1_000:.0f} KB"
    return f"{size / 1_000_000:.1f} MB"
