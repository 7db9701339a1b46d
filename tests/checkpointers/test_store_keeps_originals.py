"""`SQLModelConversationStore` keeps every original a run had, whatever the saving cadence.

A persistent run (`HistoryKit(persist=True)`) replaces messages inside the run: a cleared tool
result, a summary over the oldest calls. The history it hands back holds the copies; the store must
still keep every original, whether the application saves after each model call, once per turn, or
once at the end. The reference is the same agent run view-only (`persist=False`), whose history is
every message as it arrived.

The README's Pydantic AI 2.x recipe is run as the README writes it, with the model swapped for
`historykit.testing`'s replay model, as its "Testing your agent" section says.
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pydantic_ai.conversation")

from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse
from pydantic_ai.usage import UsageLimits

import historykit
from historykit import _provenance as provenance
from historykit._messages import Message
from historykit.checkpointers import SQLModelConversationStore
from historykit.plugins.pydantic_ai import HistoryKit
from historykit.testing import PydanticAIReplay, Recording
from tests.strategies import examples

README = Path(__file__).resolve().parents[2] / "README.md"
WINDOW = 10_000
UNLIMITED = UsageLimits(request_limit=None)


def _recipe(url: str, replay: PydanticAIReplay) -> dict[str, Any]:
    """The README's Pydantic AI 2.x recipe, run as written: only the model (the replay's, with its
    tools), the database URL and the report printing differ."""
    section = README.read_text().split("### Pydantic AI 2.x", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None, "the README's Pydantic AI 2.x recipe has no code block"
    # The recipe's definitions; the turns it runs as an example (`main()`), if any, are this test's.
    code = match.group(1).split("async def main", 1)[0]
    swaps = [('"sqlite:///chat.db"', repr(url)), ("on_report=print", "")]
    if "Agent(model," in code:  # the model named once, then handed to the agent
        swaps += [('model = "openai:gpt-5"', ""), ("Agent(model,", "Agent(replay.model, tools=replay.tools,")]
    else:
        swaps.append(('"openai:gpt-5"', "replay.model, tools=replay.tools"))
    for old, new in swaps:
        assert old in code, f"the recipe no longer has {old}: update this test"
        code = code.replace(old, new)
    # The replay answers as many calls as the session made, more than Pydantic AI's default limit.
    code = code.replace("agent.run(prompt,", "agent.run(prompt, usage_limits=UNLIMITED,")
    namespace: dict[str, Any] = {"replay": replay, "UNLIMITED": UNLIMITED}
    exec(compile(code, str(README), "exec"), namespace)
    return namespace


def _seen(messages: Sequence[ModelMessage]) -> list[tuple[Any, ...]]:
    """What identifies a message in a transcript: its kind and its parts' kinds and contents (a
    replayed closing answer is made anew on each run, so timestamps and ids are left out)."""
    seen = []
    for message in messages:
        parts = tuple(
            (
                part.part_kind,
                str(getattr(part, "content", "")),
                getattr(part, "tool_call_id", None),
            )
            for part in message.parts
        )
        seen.append((message.kind, parts))
    return seen


def _multi_turn_sample() -> Recording:
    """The bundled sample cut into four turns (a user's "go on" before every 13th model call)."""
    messages: list[Message] = []
    calls = 0
    for message in Recording.load().messages:
        if message.role == "assistant":
            calls += 1
            if calls % 13 == 0:
                messages.append(Message.user(f"Go on, part {calls // 13}."))
        messages.append(message)
    return Recording.of(messages, name="sample in turns")


async def _view_only_history(recording: Recording) -> list[ModelMessage]:
    """Every message the agent's runs had, as they arrived: the same turns run view-only."""
    replay = PydanticAIReplay(recording, window=WINDOW)
    agent = Agent(
        replay.model,
        tools=replay.tools,
        capabilities=[HistoryKit(historykit.default_pipeline(), persist=False)],
    )
    conversation: Conversation | None = None
    for turn, prompt in enumerate(replay.prompts):
        replay.start_turn(turn)
        result = await agent.run(prompt, conversation=conversation, usage_limits=UNLIMITED)
        conversation = result.conversation
    assert conversation is not None
    return conversation.messages


async def _each_turn(url: str, recording: Recording) -> SQLModelConversationStore:
    replay = PydanticAIReplay(recording, window=WINDOW)
    recipe = _recipe(url, replay)
    for turn, prompt in enumerate(replay.prompts):
        replay.start_turn(turn)
        await recipe["turn"]("chat", prompt)
    store: SQLModelConversationStore = recipe["store"]
    return store


async def _once_at_the_end(url: str, recording: Recording) -> SQLModelConversationStore:
    replay = PydanticAIReplay(recording, window=WINDOW)
    agent = Agent(replay.model, tools=replay.tools, capabilities=[HistoryKit(historykit.default_pipeline())])
    store = SQLModelConversationStore(url)
    conversation = Conversation(conversation_id="chat")
    for turn, prompt in enumerate(replay.prompts):
        replay.start_turn(turn)
        result = await agent.run(prompt, conversation=conversation, usage_limits=UNLIMITED)
        conversation = result.conversation
    await store.save(conversation)
    return store


async def _each_model_call(url: str, recording: Recording) -> SQLModelConversationStore:
    """Saved after every model call, as `make demo` does: the run's history at each tool-call node."""
    replay = PydanticAIReplay(recording, window=WINDOW)
    agent = Agent(replay.model, tools=replay.tools, capabilities=[HistoryKit(historykit.default_pipeline())])
    store = SQLModelConversationStore(url)
    conversation = await store.load("chat") or Conversation(conversation_id="chat")
    for turn, prompt in enumerate(replay.prompts):
        replay.start_turn(turn)
        async with agent.iter(prompt, conversation=conversation, usage_limits=UNLIMITED) as run:
            async for node in run:
                if Agent.is_call_tools_node(node):
                    conversation.messages = list(run.all_messages())
                    conversation.new_message_index = None  # compared with what is stored
                    await store.save(conversation)
        assert run.result is not None
        conversation.messages = list(run.result.all_messages())
        conversation.new_message_index = None
        await store.save(conversation)
    return store


CADENCES = {"each-turn": _each_turn, "once-at-the-end": _once_at_the_end, "each-model-call": _each_model_call}


def test_the_readme_recipe_keeps_every_original_of_the_sample(database_url: str) -> None:
    """The README's recipe on the bundled sample (106 messages, one turn) keeps 106 of 106."""
    recording = Recording.load()
    assert len(recording.messages) == 106

    async def run() -> None:
        store = await _each_turn(database_url, recording)
        transcript = await store.transcript("chat")
        await store.aclose()
        assert transcript is not None
        assert transcript.compactions, "the sample must compact under this window"
        reference = await _view_only_history(recording)
        assert _seen(transcript.messages) == _seen(reference)
        assert len(transcript.messages) == 106
        assert not historykit.check(transcript.messages)

    asyncio.run(run())


@pytest.mark.parametrize("window", [4_000, 6_000, 8_000])
@pytest.mark.parametrize("cadence", list(CADENCES))
def test_small_windows_keep_every_original_and_nothing_else(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch, cadence: str, window: int
) -> None:
    """Found by the cost work (marks at 20% and 40%), at windows where summaries and truncations
    come early and often. Saved once at the end, a summary written over a request Pydantic AI had
    rebuilt at a run's start (merging the previous summary with the user's next prompt) lost the
    first turns' originals; saved after each model call, a truncation notice merged into the next
    request lost its marker and was kept as something the user said."""
    monkeypatch.setattr(sys.modules[__name__], "WINDOW", window)
    recording = _multi_turn_sample()

    async def run() -> None:
        store = await CADENCES[cadence](sqlite_url, recording)
        transcript = await store.transcript("chat")
        await store.aclose()
        assert transcript is not None and transcript.compactions
        assert _seen(transcript.messages) == _seen(await _view_only_history(recording))

    asyncio.run(run())


@pytest.mark.parametrize("cadence", list(CADENCES))
def test_every_original_is_kept_whatever_the_cadence(database_url: str, cadence: str) -> None:
    recording = _multi_turn_sample()

    async def run() -> None:
        store = await CADENCES[cadence](database_url, recording)
        transcript = await store.transcript("chat")
        loaded = await store.load("chat")
        await store.aclose()
        assert transcript is not None and loaded is not None
        reference = await _view_only_history(recording)
        assert _seen(transcript.messages) == _seen(reference)
        assert not historykit.check(transcript.messages)
        # What is loaded is the view the last run was sent, not the originals.
        assert any(
            isinstance(m, ModelRequest) and m.parts and m.parts[0].part_kind == "compaction"
            for m in loaded.messages
        ) or len(loaded.messages) < len(reference)
        assert isinstance(loaded.messages[-1], ModelResponse)

    asyncio.run(run())


class _Native:
    """A native message with parts, as Pydantic AI's are (weakly referenceable, compared by identity)."""

    def __init__(self, name: str, parts: int = 1) -> None:
        self.name = name
        self.parts = [object.__new__(_Part) for _ in range(parts)]


class _Part:
    pass


@dataclass(eq=False)
class _Request:
    """A native message a framework can rebuild around its parts, as Pydantic AI's requests."""

    parts: list[_Part]
    metadata: dict[str, Any] | None = None


def _a_call(data: st.DataObject, history: list[Any], *, write: Any, copy: Any) -> list[Any]:
    """One call's output: the first message and the last kept, each run of messages between them
    kept, written over by one message (`write(at)`), copied one by one (`copy(message)`) or dropped."""
    out: list[Any] = [history[0]]
    middle = history[1:-1]
    at = 0
    while at < len(middle):
        span = data.draw(st.integers(1, len(middle) - at))
        action = data.draw(st.sampled_from(["keep", "write", "copy", "drop"]))
        run = middle[at : at + span]
        if action == "keep":
            out.extend(run)
        elif action == "write":
            out.append(write(at))
        elif action == "copy":
            out.extend(copy(m) for m in run)
        at += span
    if len(history) > 1:
        out.append(history[-1])
    return out


@settings(max_examples=examples(200), deadline=None)
@given(st.data())
def test_a_chain_of_compactions_expands_to_every_original_in_order(data: st.DataObject) -> None:
    """Calls that keep some messages, write copies or summaries in place of runs of others and drop
    some with nothing in their place (the first message, and the last, stay: a pinned prompt and the
    newest message): expanding the final history gives every message that ever arrived, in order."""
    arrived = [_Native(f"m{i}") for i in range(data.draw(st.integers(2, 12)))]
    history = list(arrived)
    for call in range(data.draw(st.integers(1, 4))):
        out = _a_call(
            data,
            history,
            write=lambda at, call=call: _Native(f"summary {call}.{at}"),
            copy=lambda m: _Native(f"copy of {m.name}"),
        )
        provenance.record(history, out)
        new = [_Native(f"new {call}.{i}") for i in range(data.draw(st.integers(0, 2)))]
        arrived.extend(new)
        history = [*out, *new]
    expanded = [original for message in history for original in provenance.originals_of(message)]
    assert [m.name for m in expanded] == [m.name for m in arrived]


def test_a_chain_of_summaries_thousands_deep_expands_without_recursion() -> None:
    """A long conversation compacted persistently: each summary replaces the previous summary and the
    messages after it, more times than Python's recursion limit (found at 10,000 messages by
    `bench_resume.py`, whose runs save through the store)."""
    depth = sys.getrecursionlimit() * 3
    arrived = [_Native("m0")]
    history = list(arrived)
    for call in range(depth):
        new = _Native(f"m{call + 1}")
        arrived.append(new)
        summary = _Native(f"summary {call}")
        provenance.record([*history, new], [summary])
        history = [summary]
    assert [m.name for m in provenance.originals_of(history[0])] == [m.name for m in arrived]


@settings(max_examples=examples(300), deadline=None)
@given(st.data())
def test_rebuilt_messages_expand_to_every_original_part_in_order(data: st.DataObject) -> None:
    """As above, with a framework rebuilding messages between calls: two neighbours merged into a
    new message around the same parts (Pydantic AI merging consecutive requests when a run starts),
    which no call has recorded; and copies that share the parts they did not change with the
    message they copy. Expanding the final history (`provenance.expand`, as a store saving it does)
    gives every part that ever arrived, in order, each once, and none a compaction wrote."""
    arrived: list[_Part] = []

    def arrive(count: int) -> list[_Request]:
        messages = [_Request([_Part() for _ in range(data.draw(st.integers(1, 2)))]) for _ in range(count)]
        arrived.extend(part for message in messages for part in message.parts)
        return messages

    history: list[_Request] = arrive(data.draw(st.integers(2, 10)))
    for _call in range(data.draw(st.integers(1, 5))):
        for _merge in range(data.draw(st.integers(0, 2))):
            if len(history) > 2:
                at = data.draw(st.integers(0, len(history) - 2))
                merged = _Request([*history[at].parts, *history[at + 1].parts])
                history[at : at + 2] = [merged]
        out = _a_call(
            data,
            history,
            write=lambda _at: _Request([_Part()], metadata={"written": True}),
            # A copy changes its first part and shares the rest with the message it copies.
            copy=lambda m: _Request([_Part(), *m.parts[1:]], metadata={"written": True}),
        )
        provenance.record(history, out)
        history = [*out, *arrive(data.draw(st.integers(0, 2)))]
    expanded = [original for message in history for original in provenance.expand(message)]
    written = {id(part) for m in history for part in m.parts} - {id(part) for part in arrived}
    parts = [part for m in expanded for part in m.parts if id(part) not in written]
    assert [id(p) for p in parts] == [id(p) for p in arrived]


def test_a_compaction_racing_a_saved_run_is_refused_and_duplicates_nothing(database_url: str) -> None:
    """`compact_conversation` keeps the revision it read: a run saved in between wins, the stale
    compaction is refused (`ConversationConflict`), and compacting again from a new load works."""
    from pydantic_ai.conversation_store import ConversationConflict

    recording = _multi_turn_sample()

    async def run() -> None:
        replay = PydanticAIReplay(recording, window=WINDOW)
        kit = HistoryKit(historykit.default_pipeline())
        agent = Agent(replay.model, tools=replay.tools, capabilities=[kit])
        store = SQLModelConversationStore(database_url)
        replay.start_turn(0)
        first = await agent.run(
            replay.prompts[0], conversation=Conversation(conversation_id="chat"), usage_limits=UNLIMITED
        )
        await store.save(first)
        loaded = await store.load("chat")
        assert loaded is not None
        compacting = await kit.compact_conversation(loaded, "keep the file names", keep_last=2)
        # Meanwhile a run continues the conversation and is saved.
        replay.start_turn(1)
        racing = await store.load("chat")
        second = await agent.run(replay.prompts[1], conversation=racing, usage_limits=UNLIMITED)
        await store.save(second)
        with pytest.raises(ConversationConflict):
            await store.save(compacting)
        again = await kit.compact_conversation(await store.load("chat"), "keep the file names", keep_last=2)
        await store.save(again)
        transcript = await store.transcript("chat")
        await store.aclose()
        assert transcript is not None and not historykit.check(transcript.messages)
        prompts = [p.content for m in transcript.messages for p in m.parts if p.part_kind == "user-prompt"]
        assert len(prompts) == len(set(map(str, prompts))) == 2
        assert _seen(transcript.messages)[-1] == _seen(second.all_messages())[-1]

    asyncio.run(run())
