"""Recall: the model gets a cleared tool output back without running the tool again.

`ClearToolResults` and `DedupeFileReads` replace old tool output by short placeholders. Without
recall a placeholder says "call the tool again", which can be slow, costly or unsafe to repeat (a
query that bills, a command with side effects, a page that changed since). With recall installed
(`HistoryKit(..., recall=True)` for Pydantic AI, `HistoryKitMiddleware(..., recall=True)` for
LangChain), each placeholder carries a handle and names the tool that gives the output back:

    [cleared: output of Read(file_path='src/app.py'), 2,311 tokens; recall(handle='3f9a0c1b2d') returns it]

The handle is `recall_handle(content)`: 10 hex digits of a BLAKE2b digest of the cleared content
itself. So it depends on nothing but that content: the same in view-only and persistent mode and
on every replay (the view stays byte-identical), unchanged by `Repair` renaming a call id, and the
same for a later copy of the same output. Two different outputs get different handles (a
collision is a 1-in-10^12 event; a lookup that finds two contents says so instead of guessing).

Where the tool finds the original, in order:

1. the originals the conversation kept (persistent mode replaces the history, so each call's
   pipeline result names what its placeholders replaced, `PipelineResult.originals`, and the
   integration keeps them with the conversation: Pydantic AI in the conversation's state
   (`historykit._conversations`), LangChain in the graph state; up to `Recall.max_originals` per
   conversation, the oldest dropped first); in both modes, also the indexes a summary or a
   truncation wrote of the outputs it could not list (`historykit.processors._summary_recall`),
   which exist nowhere else;
2. the conversation's history as the framework holds it (view-only mode keeps every message);
3. the store's log, when a store is given (`SQLModelSaver.transcript(thread_id)`,
   `SQLModelConversationStore.transcript(conversation_id)`: every message the thread ever had),
   which also serves a new process and conversations the memory dropped.

Only the conversation the tool runs in is searched: a handle of another conversation is unknown
there, whatever it names. An unknown or malformed handle is answered with a short `[recall: ...]`
text (never an exception, and never more than a few dozen characters of what was passed), so the
run goes on. A long original comes in pages of `Recall.max_chars` characters, each ending with a
note naming the `offset=` of the next page; the original found for the first page is kept with the
conversation, so paging through it costs time linear in its length.

Images: `ClearMedia`'s placeholders name the image's handle (`media_handle`: a digest of its
payload's digest, or of its URL), and the tool answers with the image itself, the framework's own
item (a Pydantic AI `BinaryContent` or `ImageUrl`, a LangChain image block), found in the
conversation's history (view-only mode) or in the store's log (`Recall.media`). Persistent mode
replaces the image in the history, and no original is kept in memory for it: the integrations
install the tool on `ClearMedia` only where the image can be found again (`install(media=...)`:
view-only mode, and LangChain's persistent mode with a `SQLModelSaver` store, which logs every
message as the graph checkpoints it), so no placeholder offers an image the tool cannot give.

A placeholder names its own content's handle. Only a notice or placeholder historykit wrote (its
message carries a compaction marker) passes on the handle it names: a tool output whose text merely
looks like one is an output like any other.

The model can also read part of an original (`historykit._reading`): lines `start_line` to
`end_line`, or the lines that contain a text (`grep`), as `OffloadToolOutputs`' notes suggest for
an output shortened when it arrived. With `Recall(search=True)` a second tool searches everything the
conversation had by the words it contained (`historykit._transcript_search`), from the same sources,
and names the handle of each tool output it finds.

What a recall result is afterwards: an ordinary tool output. It can be cleared again like any
other (its placeholder carries the same handle when it returned the whole original, since the
handle is the content's), and it is never taken for a new read of a file: `DedupeFileReads` only
recognises file-reading tools, so a recalled copy neither supersedes nor is superseded by reads,
and summaries do not list it as a file the agent read.

Example:
    ```python
    from historykit._recall import Recall, recall_handle

    recall = Recall(max_chars=10_000)            # or Recall(store=saver): originals from the log too
    handle = recall_handle("the tool's output")  # what a placeholder of that output names
    ```
"""

from __future__ import annotations

import hashlib
import inspect
import re
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from historykit._identity_cache import DEFAULT_CACHE_POLICY, IdentityCache
from historykit._messages import MediaPart, Message, ToolResultPart
from historykit._plans import adrive, drive
from historykit._reading import Reading, shown
from historykit._validate import check_bool
from historykit.errors import ArgumentTypeError, InvalidArgumentError

if TYPE_CHECKING:
    from historykit._conversations import ConversationState
    from historykit._transcript_search import Hit


HANDLE_LENGTH = 10
"""Hex digits in a handle: 40 bits, so that two outputs of one conversation practically never share one."""
_HANDLE = re.compile(rf"[0-9a-f]{{{HANDLE_LENGTH}}}")
_HANDLES: IdentityCache[str] = IdentityCache()
"""`content_handle`'s digests, per content string object: a history's outputs are hashed once."""


def recall_handle(content: str) -> str:
    """The handle of a tool output: 10 hex digits of the BLAKE2b digest of its text."""
    return hashlib.blake2b(
        content.encode("utf-8", "surrogatepass"), digest_size=HANDLE_LENGTH // 2
    ).hexdigest()


def content_handle(content: str) -> str:
    """`recall_handle(content)`, remembered for this very string object (the adapters hand the same
    object back on every call): looking a handle up in a long history hashes each output once."""
    handle = _HANDLES.get(content)
    if handle is None:
        handle = _HANDLES.put(content, recall_handle(content), DEFAULT_CACHE_POLICY)
    return handle


def media_handle(part: MediaPart) -> str:
    """The handle of an image or file (`ClearMedia`'s placeholders name it): 10 hex digits of a
    digest of its payload's digest, or of its URL or file id when it has no inline payload. It
    cannot be the handle of a tool output's text (the digested text starts with a NUL)."""
    return recall_handle(f"\0media\0{part.digest or part.source}")


def media_originals(handle: str, messages: Sequence[Message]) -> list[MediaPart]:
    """The distinct images and files in `messages` (in user messages and in tool results) whose
    handle is `handle`: one normally, none when the history does not have it."""
    found: dict[tuple[str, str], MediaPart] = {}
    for msg in messages:
        for part in msg.parts:
            for item in part.media if isinstance(part, ToolResultPart) else (part,):
                if (
                    isinstance(item, MediaPart)
                    and (item.digest or item.source)
                    and media_handle(item) == handle
                ):
                    found.setdefault((item.media_type, item.digest or item.source), item)
    return list(found.values())


def recall_call(tool: str, handle: str) -> str:
    """How a placeholder names the call that gives an output back: `recall(handle='3f9a0c1b2d')`."""
    return f"{tool}(handle='{handle}')"


def handle_in(text: str, tool: str) -> str | None:
    """The handle a placeholder or notice names for `tool` (the last one it names), else `None`."""
    head = f"{tool}(handle='"
    at = text.rfind(head)
    if at < 0:
        return None
    handle = text[at + len(head) : at + len(head) + HANDLE_LENGTH]
    closed = text[at + len(head) + HANDLE_LENGTH : at + len(head) + HANDLE_LENGTH + 2] == "')"
    return handle if closed and _HANDLE.fullmatch(handle) else None


def handles_in(text: str, tool: str) -> list[str]:
    """Every handle `text` names for `tool`, in order (a summary's recall section names many)."""
    return re.findall(rf"\b{re.escape(tool)}\(handle='([0-9a-f]{{{HANDLE_LENGTH}}})'\)", text)


def recall_option(option: object) -> Recall | None:
    """An integration's `recall=` option: `True` is the default `Recall()`, `False` (or `None`) none."""
    if option is True:
        return Recall()
    if option is False or option is None:
        return None
    if not isinstance(option, Recall):
        raise ArgumentTypeError(
            f"recall must be True, False or a historykit Recall, got {type(option).__qualname__}"
        )
    return option


def placeholder_handle(content: str, tool: str, written: bool) -> str:
    """The handle a placeholder for `content` names: the content's own, unless `content` is a
    placeholder, notice or shortened output historykit `written` (its message carries a compaction
    marker) whose last line names a handle: then that one, the original it stands for. A tool
    output that only looks like one names its own handle, so no output can point recall at another."""
    if written:
        last = content[content.rfind("\n") + 1 :]
        named = handle_in(last, tool) if last.startswith("[") else None
        if named is not None:
            return named
    return recall_handle(content)


def check_recall_tool(value: object) -> str | None:
    """A processor's `recall_tool` option, checked: `None` or a tool name."""
    if value is not None and (not isinstance(value, str) or not value.isidentifier()):
        raise InvalidArgumentError(
            f"recall_tool must be None or a tool name (a Python identifier), got {value!r}"
        )
    return value


def originals(handle: str, messages: Sequence[Message]) -> list[str]:
    """The distinct tool outputs in `messages` whose handle is `handle` (one, normally; none when
    the history does not have it; two only on a digest collision)."""
    found: list[str] = []
    for msg in messages:
        for part in msg.parts:
            content = part.content if isinstance(part, ToolResultPart) else None
            if content is not None and content not in found and content_handle(content) == handle:
                found.append(content)
    return found


@dataclass
class Recall:
    """The `recall` tool an integration installs: the model gets a cleared tool output back by the
    handle its placeholder names, without running the tool again.

    The integration sets `recall_tool` on its pipeline's `ClearToolResults`, `DedupeFileReads` and
    (where a removed image can be found again) `ClearMedia` (so their placeholders name the tool and
    a handle), adds the tool to the agent, and keeps the
    originals persistent mode replaced with the conversation. See the module documentation for where
    originals are found.

    Example:
        ```python
        from historykit.checkpointers import SQLModelSaver
        from historykit.plugins.langchain import HistoryKitMiddleware
        from historykit.plugins.pydantic_ai import HistoryKit
        from historykit import Recall

        HistoryKit(pipeline, recall=True)                                      # the defaults
        HistoryKit(pipeline, recall=Recall(store=store, max_chars=8_000))      # a SQLModelConversationStore
        saver = SQLModelSaver("sqlite:///agent.db")
        HistoryKitMiddleware(pipeline, persist=True, recall=Recall(store=saver))
        HistoryKitMiddleware(pipeline, recall=Recall(store=saver, search=True))  # and search_history
        ```
    """

    name: str = "recall"
    """The tool's name, as placeholders name it."""
    max_chars: int = 20_000
    """Most characters one call returns; a longer original comes in pages, each with a note."""
    store: Any = None
    """A store whose log has every message the conversation ever had: a `SQLModelSaver` (LangGraph)
    or a `SQLModelConversationStore` (Pydantic AI); anything with `transcript(conversation_id)`
    (and optionally `atranscript`) returning a `Transcript`. `None`: the conversation's own
    originals and history only."""
    max_originals: int = 1_000
    """Originals a conversation keeps for recall (the oldest go first)."""
    search: bool = False
    """Also add a search tool over the conversation's own transcript (`search_name`): the model
    finds what it saw before by the words it contained (`historykit._transcript_search`)."""
    search_name: str = "search_history"
    """The search tool's name."""

    def __post_init__(self) -> None:
        for option in ("name", "search_name"):
            value = getattr(self, option)
            if not isinstance(value, str) or not value.isidentifier():
                raise InvalidArgumentError(
                    f"{option} must be a tool name (a Python identifier), got {value!r}"
                )
        if self.search is True and self.search_name == self.name:
            raise InvalidArgumentError(
                f"search_name and name are both {self.name!r}: two tools need two names"
            )
        check_bool("search", self.search)
        for option in ("max_chars", "max_originals"):
            value = getattr(self, option)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgumentError(f"{option} must be a positive int, got {value!r}")
        if self.store is not None and not callable(getattr(self.store, "transcript", None)):
            raise ArgumentTypeError(
                f"store must have a transcript(conversation_id) method (SQLModelSaver, "
                f"SQLModelConversationStore), got {type(self.store).__qualname__}"
            )

    @property
    def description(self) -> str:
        """What the model reads about the tool."""
        return (
            "Return the full text of a tool output that was cleared or shortened to save context, or "
            "an image that was removed. "
            f"Pass the handle the placeholder names, e.g. {recall_call(self.name, '3f9a0c1b2d')}; "
            "nothing is run again. A long output comes in parts: pass the offset the note at the end "
            "of a part names to get the next one. To read less of it: start_line and end_line return "
            "those lines (numbered, from 1); grep returns the lines that contain a text "
            "(case-insensitive, not a regular expression)."
        )

    @property
    def search_description(self) -> str:
        """What the model reads about the search tool."""
        from historykit._transcript_search import HITS_PER_PAGE

        return (
            "Search everything this conversation contained, including what was cleared or summarized "
            "to save context: the user's and your messages, the tools called with their arguments "
            "(file paths, commands) and what they returned. Give one or more words; a line matches "
            "when it contains all of them (case-insensitive, not a regular expression). Hits come "
            f"newest first, {HITS_PER_PAGE} a page; a tool output's hit names the {self.name} call that "
            "returns it."
        )

    def install(self, processors: Sequence[object], *, media: bool = True) -> None:
        """Make the placeholders of `processors` name this tool: sets `recall_tool` on each
        processor that has that option (`ClearToolResults`, `DedupeFileReads`, `ClearMedia`,
        `OffloadToolOutputs`, `Summarize`, `PairwiseTruncate`).

        `media=False` leaves out the processors that replace images (`ClearMedia`): the integration
        says so in persistent mode without a `store`, where an image replaced in the history is
        nowhere to be found again, so a placeholder must not offer it."""
        for processor in processors:
            current = getattr(processor, "recall_tool", False)
            if current is False or (not media and getattr(processor, "replaces_media", False)):
                continue  # no such option, or no image to give back
            if current is not None and current != self.name:
                raise InvalidArgumentError(
                    f"{type(processor).__name__} names the recall tool {current!r}, but the tool "
                    f"installed is {self.name!r}"
                )
            processor.recall_tool = self.name  # type: ignore[attr-defined]

    def keep(self, state: ConversationState, originals: Mapping[str, str]) -> None:
        """Keep the originals a call's placeholders replaced (`PipelineResult.originals`) with the
        conversation they belong to."""
        for handle, content in originals.items():
            state.keep_original(handle, content, self.max_originals)

    # --- the tool ---------------------------------------------------------------------------------

    def media(
        self, handle: object, *, history: Sequence[Message] = (), store_key: str | None = None
    ) -> MediaPart | None:
        """The image or file `handle` names (`ClearMedia`'s placeholders), found in the
        conversation's neutral `history`, then in the store's transcript of `store_key`; `None`
        when neither has it (the tool then answers with `lookup`). Its `native` is the framework's
        own item, which the integration's tool returns to the model."""
        if not isinstance(handle, str) or not _HANDLE.fullmatch(handle):
            return None
        found = media_originals(handle, history)
        if not found and self.store is not None and store_key is not None:
            found = _media_in_transcript(handle, self._transcript(store_key))
        return found[0] if len(found) == 1 else None

    async def amedia(
        self, handle: object, *, history: Sequence[Message] = (), store_key: str | None = None
    ) -> MediaPart | None:
        """`media` for async code: the store's transcript is read on the event loop."""
        if not isinstance(handle, str) or not _HANDLE.fullmatch(handle):
            return None
        found = media_originals(handle, history)
        if not found and self.store is not None and store_key is not None:
            found = _media_in_transcript(handle, await self._atranscript(store_key))
        return found[0] if len(found) == 1 else None

    def lookup(
        self,
        handle: object,
        offset: object = 0,
        start_line: object = None,
        end_line: object = None,
        grep: object = None,
        *,
        state: ConversationState | None = None,
        kept: Mapping[str, str] | None = None,
        history: Sequence[Message] = (),
        store_key: str | None = None,
    ) -> str:
        """The tool's answer: the original output `handle` names (from `offset` on, or its lines
        `start_line` to `end_line`, or those that contain `grep`: `historykit._reading`; at most
        `max_chars` characters, with a note when there is more), or a `[recall: ...]` text saying why
        there is none. Searched, in order: the originals the conversation's `state` kept, those the
        framework's own state `kept` for it, its neutral `history`, and the store's transcript of
        `store_key` (the conversation's id there)."""
        reading = Reading.checked(offset, start_line, end_line, grep)
        return self._read(self._lookup(handle, reading, state, kept, history, store_key))

    async def alookup(
        self,
        handle: object,
        offset: object = 0,
        start_line: object = None,
        end_line: object = None,
        grep: object = None,
        *,
        state: ConversationState | None = None,
        kept: Mapping[str, str] | None = None,
        history: Sequence[Message] = (),
        store_key: str | None = None,
    ) -> str:
        """`lookup` for async code: the store's transcript is read on the event loop."""
        reading = Reading.checked(offset, start_line, end_line, grep)
        return await self._aread(self._lookup(handle, reading, state, kept, history, store_key))

    def find(
        self,
        query: object,
        page: object = 1,
        *,
        state: ConversationState | None = None,
        kept: Mapping[str, str] | None = None,
        history: Sequence[Message] = (),
        store_key: str | None = None,
    ) -> str:
        """The search tool's answer: page `page` of the parts of the conversation with a line that
        contains every word of `query` (`historykit._transcript_search`), or a `[search: ...]` text
        saying why there is none. Searched: the framework's `history` and the originals the
        conversation's `state` and the framework's state `kept` (newest first), then the store's
        transcript of `store_key` (every message the conversation had); a part found twice is one hit."""
        return self._read(self._find(query, page, state, kept, history, store_key))

    async def afind(
        self,
        query: object,
        page: object = 1,
        *,
        state: ConversationState | None = None,
        kept: Mapping[str, str] | None = None,
        history: Sequence[Message] = (),
        store_key: str | None = None,
    ) -> str:
        """`find` for async code: the store's transcript is read on the event loop."""
        return await self._aread(self._find(query, page, state, kept, history, store_key))

    def _read(self, plan: Generator[str, Any, str]) -> str:
        """Run a look-up or search plan (`_lookup`, `_find`), reading the store's transcript it asks
        for with the store's sync API (`historykit._plans`)."""
        return drive(plan, self._transcript)

    def _transcript(self, key: str) -> Any:
        transcript = self.store.transcript(key)
        if inspect.isawaitable(transcript):
            close = getattr(transcript, "close", None)
            if close is not None:
                close()
            raise ArgumentTypeError(
                f"the recall store {type(self.store).__qualname__} reads its transcript asynchronously: "
                "run the agent with its async API (ainvoke, run)"
            )
        return transcript

    async def _aread(self, plan: Generator[str, Any, str]) -> str:
        """`_read` for async code: the store's transcript is read on the event loop."""
        return await adrive(plan, self._atranscript)

    async def _atranscript(self, key: str) -> Any:
        read = getattr(self.store, "atranscript", None) or self.store.transcript
        transcript = read(key)
        return await transcript if inspect.isawaitable(transcript) else transcript

    def _find(
        self,
        query: object,
        page: object,
        state: ConversationState | None,
        kept: Mapping[str, str] | None,
        history: Sequence[Message],
        store_key: str | None,
        stored: Sequence[Hit] | None = None,
    ) -> Generator[str, Any, str]:
        """The search written once, as `_lookup` is: it yields the store key whose transcript it
        needs and is sent the transcript. `stored`: the store's hits, found already (by a durable
        unit: `stored_hits`), so no transcript is read here."""
        from historykit._transcript_search import check_query, find, merged, render

        problem = check_query(query, page)
        if problem is not None:
            return problem
        assert isinstance(query, str) and isinstance(page, int)  # checked above
        hits = find(kept_originals(history, state, kept), query)
        if stored is None and self.store is not None and store_key is not None:
            stored = find(_neutral_transcript((yield store_key)), query)
        return render(merged(hits, stored or ()), query, page, self.search_name, self.name)

    async def stored_hits(self, query: str, store_key: str) -> list[Hit]:
        """The hits of `query` in the store's transcript of `store_key`: what a durable engine runs
        as a unit of its own (the read is recorded; the workflow never touches the database)."""
        from historykit._transcript_search import find

        return find(_neutral_transcript(await self._atranscript(store_key)), query)

    def find_with(
        self,
        query: object,
        page: object,
        stored: Sequence[Hit],
        *,
        state: ConversationState | None = None,
        kept: Mapping[str, str] | None = None,
        history: Sequence[Message] = (),
    ) -> str:
        """`find` with the store's hits given (`stored_hits`, run by a durable unit)."""
        return self._read(self._find(query, page, state, kept, history, None, stored))

    def _lookup(
        self,
        handle: object,
        reading: Reading | str,
        state: ConversationState | None,
        kept: Mapping[str, str] | None,
        history: Sequence[Message],
        store_key: str | None,
    ) -> Generator[str, Any, str]:
        """The lookup written once: it yields the store key whose transcript it needs (at most
        once) and is sent the transcript, which `lookup` reads and `alookup` awaits."""
        if not isinstance(handle, str) or not _HANDLE.fullmatch(handle):
            return (
                f"[recall: {shown(handle)} is not a handle: a handle is the {HANDLE_LENGTH} hex digits a "
                f"placeholder names in {recall_call(self.name, '…')}]"
            )
        if isinstance(reading, str):
            return reading  # what is wrong with the arguments
        found = self._known(handle, state, kept, history)
        if not found and self.store is not None and store_key is not None:
            found = _in_transcript(handle, (yield store_key))
        return self._answer(handle, reading, found, state)

    @staticmethod
    def _known(
        handle: str,
        state: ConversationState | None,
        kept: Mapping[str, str] | None,
        history: Sequence[Message],
    ) -> list[str]:
        for source in (state.originals if state is not None else None, kept):
            if source is not None and isinstance(content := source.get(handle), str):
                return [content]
        return originals(handle, history) if history else []

    def _answer(
        self, handle: str, reading: Reading, found: list[str], state: ConversationState | None
    ) -> str:
        if not found:
            return (
                f"[recall: no cleared output has the handle '{handle}' in this conversation; check the "
                "handle in the placeholder, or run the tool again]"
            )
        if len(found) > 1:
            return (
                f"[recall: {len(found)} different outputs have the handle '{handle}'; recall cannot tell "
                "which one the placeholder replaced: run the tool again]"
            )
        content = found[0]
        answer = reading.answer(self.name, handle, content, self.max_chars)
        if answer is not content and state is not None and handle not in state.originals:
            # The next parts come from here, not from another search of the history or the store.
            state.keep_original(handle, content, self.max_originals)
        return answer


def _media_in_transcript(handle: str, transcript: Any) -> list[MediaPart]:
    return media_originals(handle, _neutral_transcript(transcript))


def _neutral_transcript(transcript: Any) -> list[Message]:
    """A store's `Transcript` as neutral messages (none when the store has no such conversation)."""
    messages = getattr(transcript, "messages", None) if transcript is not None else None
    if not messages:
        return []
    from historykit._frameworks import adapter_for

    return adapter_for(messages).to_neutral(messages)


def _in_transcript(handle: str, transcript: Any) -> list[str]:
    return originals(handle, _neutral_transcript(transcript))


def kept_originals(
    history: Sequence[Message], state: ConversationState | None, kept: Mapping[str, str] | None
) -> list[Message]:
    """The framework's `history`, then the tool outputs kept for recall that it does not have
    (persistent mode replaced them), each as an output of its own."""
    messages = list(history)
    outputs = {p.content for m in messages for p in m.parts if isinstance(p, ToolResultPart)}
    for source in (state.originals if state is not None else None, kept):
        for content in (source or {}).values():
            if isinstance(content, str) and content not in outputs:
                outputs.add(content)
                messages.append(Message("tool", (ToolResultPart("", None, content),)))
    return messages
