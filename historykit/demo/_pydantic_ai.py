"""The demo's Pydantic AI run: an `Agent` with `HistoryKit`, saved in `SQLModelConversationStore`."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from historykit._pipeline import HistoryProcessor, Report
from historykit._tokens import TokenCounter
from historykit.demo._replay_run import DEFAULT_WINDOW, THREAD_IDS, ReplayRun, collecting
from historykit.testing import Call, PydanticAIReplay, Recording


async def run_pydantic_ai(
    recording: Recording,
    pipeline: HistoryProcessor,
    *,
    window: int = DEFAULT_WINDOW,
    database: str | None = None,
    counter: TokenCounter | None = None,
    on_call: Callable[[Call], None] | None = None,
    on_report: Callable[[Report], None] | None = None,
    delay: float = 0.0,
) -> ReplayRun:
    """Replay `recording` with a Pydantic AI agent running `pipeline` (persistent), saving every call.

    With `database` (a SQLAlchemy URL) the conversation is saved to `SQLModelConversationStore`
    after every model call (so a compaction leaves the original history stored as a branch), under
    the id `demo-pydantic-ai`, replacing the previous demo's.
    """
    from pydantic_ai import Agent
    from pydantic_ai.usage import UsageLimits

    from historykit.plugins.pydantic_ai import HistoryKit

    replay = PydanticAIReplay(recording, window=window, counter=counter, on_call=on_call, delay=delay)
    reports, report = collecting(on_report)
    kit = HistoryKit(pipeline, on_report=report)
    agent = Agent(replay.model, tools=replay.tools, system_prompt=replay.system_prompts, capabilities=[kit])
    store, conversation = await _open_store(database)
    thread_id = THREAD_IDS["pydantic-ai"]
    history: list[Any] = []
    answer = ""
    started = time.perf_counter()
    for turn in range(len(recording.turns)):
        replay.start_turn(turn)
        async with agent.iter(
            replay.prompts[turn], message_history=history, usage_limits=UsageLimits(request_limit=None)
        ) as run:
            async for node in run:
                if store is not None and Agent.is_call_tools_node(node):
                    # Saved once per model call: a compaction shows as a history that no longer
                    # extends the stored one, which the store keeps as a branch.
                    await _save(store, conversation, run.all_messages())
            assert run.result is not None
            history = run.result.all_messages()
            answer = str(run.result.output)
    seconds = time.perf_counter() - started
    result = ReplayRun("Pydantic AI", thread_id, replay.calls, reports, answer, seconds)
    if store is not None:
        await _save(store, conversation, history)
        result.transcript = await store.transcript(thread_id)
        loaded = await store.load(thread_id)
        result.history = len(loaded.messages) if loaded is not None else 0
        await store.aclose()
    else:
        result.history = len(history)
        result.notes.append("not persisted: SQLModelConversationStore needs Pydantic AI 2.x")
    return result


async def _open_store(database: str | None) -> tuple[Any, Any]:
    if database is None:
        return None, None
    try:
        from pydantic_ai.conversation import Conversation

        from historykit.checkpointers import SQLModelConversationStore
    except ImportError:
        return None, None
    store = SQLModelConversationStore(database)
    thread_id = THREAD_IDS["pydantic-ai"]
    if await store.read_record(thread_id) is not None:
        await store.delete(thread_id)
    return store, Conversation(conversation_id=thread_id, messages=[])


async def _save(store: Any, conversation: Any, messages: Sequence[Any]) -> None:
    if list(messages) == list(conversation.messages):
        return
    conversation.messages = list(messages)
    await store.save(conversation)
