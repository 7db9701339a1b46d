"""historykit processors in LangGraph graphs and LangChain v1 agents.

Two ways in, each view-only or persistent:

- `HistoryKitHook(processor)`: a graph node; as `create_react_agent(pre_model_hook=...)` it is view
  only and returns `{"llm_input_messages": processed}`; with `persist=True` it returns a `messages`
  state update, as a pre-model hook or as a node of your own `StateGraph` before the model.
- `HistoryKitMiddleware(processor)`: LangChain v1 `create_agent(middleware=[...])`; view only by
  default (it edits the model request), persistent with `persist=True` (it also writes the edits
  to the agent state).

What each mode keeps:

- **View only**: the model is sent the processed history; the graph state (and so every checkpoint
  and `get_state()`) keeps every message, unedited. The view is derived from it by replaying the
  conversation's model calls (`historykit._view`): the model is sent exactly what persistent mode
  would send, append-only between compactions (the provider's prompt cache keeps hitting).
- **Persistent**: the edits go into the state through its `add_messages` reducer: a
  `RemoveMessage(id=...)` for each message the processors removed, the edited messages under their
  own ids (which `add_messages` replaces in place), and new messages (a summary, a notice) appended
  when they come last; when a new message has to go in between (a summary after the task), the
  update is `RemoveMessage(id=REMOVE_ALL_MESSAGES)` followed by the whole processed list. State and
  checkpoints shrink with the history; later calls start from the processed history. The
  original messages are not lost when the checkpointer keeps them: with
  `historykit.checkpointers.SQLModelSaver`, `saver.transcript(thread_id)` still returns every message
  the thread ever had, with the compaction markers. Persistent mode needs the state's messages
  channel to use LangGraph's `add_messages` reducer (`MessagesState`, `AgentState` do).

What the budget counts: the middleware processes the system message with the history (the model
sees both); `HistoryKitHook` processes the state's messages, so a `prompt=` that `create_react_agent`
adds after the hook is not counted: keep it in the state, or leave room for it in `context_window`.
Tool definitions are never counted.

The context window, in order: the `context_window` you give (`explicit`); else the chat model's
profile, `model.profile["max_input_tokens"]` (`model profile`): the request's model for the
middleware, the `model=` you pass for the hook; else historykit's conservative default (`default`).
Every call's report (`window_source` says which window) goes to `on_report`, the latest is
`last_report`, and the pipeline logs it at debug level (the `historykit` logger). Sync and async
graphs are both served: the async paths await the pipeline (`arun`), so a `Summarize` with an async
summarizer runs on the graph's event loop.

Thinking binding (`historykit.BINDING_MODELS`): whether the model binds replayed thinking to the history
is `binds_thinking=` when given, else read from the chat model's name (the request's model for the
middleware, the `model=` you pass for the hook), else from the model names in the messages'
`response_metadata`. On such a model, thinking after an edit is dropped in the same call.

Compact and retry (the middleware): when the provider refuses the call as too long for its context
window (LangChain's `ContextOverflowError`, or the SDK's `BadRequestError` saying so), the pipeline
runs again on the same input with a smaller window and the model is called once more
(`historykit.plugins._overflow`); the smaller window stays with the thread, in its state too
(`HistoryKitState`), so a process that resumes the thread budgets for it at once. The report of the retry
has an `OverflowRetry` step and marker; a second refusal reaches the caller as the model raised it.
The hook runs before the model node and cannot retry.

Manual compaction (both): `compact(focus, thread_id=None)` makes the thread's next model call run
`Pipeline.compact` (summarize now, with the focus; the marker records `automatic=False`), in either
mode; `compact_thread(graph, config, focus)` / `acompact_thread` compact a stored thread at once
through `graph.update_state` (persistent mode), so the checkpointer records it.

Compaction hooks (both): `before_compaction=` and `after_compaction=` are called around each
compaction with a `historykit.BeforeCompaction` / `historykit.AfterCompaction` whose `conversation`
is `("langgraph", thread_id, checkpoint_ns)`: the before-hook may veto the compaction (`False`) or
change the summary's focus (`historykit.AdjustCompaction`). Plain or async functions; an async one
needs the graph's async entry points (`ainvoke`, `astream`), a sync run raises `ArgumentTypeError`.

Recall (the middleware, `recall=True`, `historykit.Recall`): the middleware adds a `recall` tool
that gives a cleared tool output back by the handle its placeholder names, from the graph state
(view-only keeps every message), the originals it kept (persistent) or the `Recall.store`'s
transcript (a `SQLModelSaver`: every message the thread ever had).

Example:
    ```python
    from langchain.agents import create_agent
    from langgraph.prebuilt import create_react_agent
    from historykit import Pipeline
    from historykit.checkpointers import SQLModelSaver
    from historykit.plugins.langchain import HistoryKitHook, HistoryKitMiddleware
    from historykit.processors import ClearToolResults, PairwiseTruncate, Repair

    pipeline = Pipeline([ClearToolResults(), PairwiseTruncate(), Repair()])
    react = create_react_agent(model, tools, pre_model_hook=HistoryKitHook(pipeline, model=model))
    agent = create_agent(
        model, tools, middleware=[HistoryKitMiddleware(pipeline, persist=True)],
        checkpointer=SQLModelSaver("sqlite:///agent.db"),
    )
    ```
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, NotRequired, cast

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ModelRequest,
    ModelResponse,
    PrivateStateAttr,
)
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, RemoveMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.types import Command

from historykit._binding import model_binds_thinking
from historykit._context_window import ContextWindow, check_context_window
from historykit._conversations import ConversationState, conversation_key
from historykit._hooks import AfterHook, BeforeHook
from historykit._messages import PROVIDER_COMPACTION_KEY, Message, ProviderCompaction
from historykit._pipeline import (
    Call,
    HistoryProcessor,
    ManualCompaction,
    PipelineResult,
    Report,
    native_result,
)
from historykit._recall import Recall, recall_option
from historykit._validate import check_bool
from historykit._view import Mode
from historykit.errors import ArgumentTypeError, InvalidArgumentError, WriteConflictError
from historykit.plugins._glue import Glue, pipeline_of, refuse_call
from historykit.plugins._native_compaction import ANTHROPIC_COMPACTION_BETA
from historykit.plugins._overflow import arecompact, recompact
from historykit.plugins.langchain._adapter import LangChainAdapter

try:
    from langchain.agents.middleware.types import ExtendedModelResponse as _ExtendedModelResponse
except ImportError:  # pragma: no cover - langchain 1.x before wrap_model_call could update state
    _ExtendedModelResponse = None  # type: ignore[assignment,misc]

_ADAPTER = LangChainAdapter()
"""The one adapter every call converts with, once in and once out."""


def chat_model_context_window(model: Any) -> ContextWindow | None:
    """`model.profile["max_input_tokens"]` of a LangChain chat model (or a binding of one), if it has one.

    Example:
        ```python
        from historykit.plugins.langchain import chat_model_context_window

        chat_model_context_window(ChatAnthropic(model="claude-sonnet-4-5"))  # from its profile
        ```
    """
    while model is not None and not hasattr(model, "profile") and hasattr(model, "bound"):
        model = model.bound  # a RunnableBinding (tools bound): the chat model is inside
    profile = getattr(model, "profile", None)
    if not isinstance(profile, dict):
        return None
    tokens = profile.get("max_input_tokens")
    if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens > 0:
        return ContextWindow(tokens, "model profile")
    return None


def chat_model_binds_thinking(model: Any) -> bool | None:
    """Whether a LangChain chat model (or a binding of one) binds thinking to the history (R13).

    From its model name (`model_name`, or `model` as `ChatAnthropic` calls it); `None` when there is
    no model or it names none (the messages' `response_metadata` model names then decide).
    """
    while model is not None and not hasattr(model, "model_name") and hasattr(model, "bound"):
        model = model.bound  # a RunnableBinding (tools bound): the chat model is inside
    for attribute in ("model_name", "model"):
        name = getattr(model, attribute, None)
        if isinstance(name, str) and name:
            return model_binds_thinking(name)
    return None


def state_update(
    old: Sequence[BaseMessage], new: Sequence[BaseMessage], *, appended: Sequence[BaseMessage] = ()
) -> list[BaseMessage]:
    """The `add_messages` update that turns the state's `old` messages into `new` (then `appended`).

    `appended` are messages the same step adds before this update is applied (the model's response,
    for the middleware). Removed messages become `RemoveMessage(id=...)`, edited ones keep their ids
    (replaced in place), new ones get an id and are appended when they come last; otherwise the
    update replaces everything (`REMOVE_ALL_MESSAGES`). `[]` when nothing changed.

    Example:
        ```python
        from langgraph.graph.message import add_messages
        from historykit.plugins.langchain import state_update

        assert add_messages(old, state_update(old, processed)) == processed  # same ids, same order
        ```
    """
    if len(old) == len(new) and all(a is b for a, b in zip(old, new)):
        return []
    new = _with_unique_ids(new)
    position = {m.id: i for i, m in enumerate(old) if m.id is not None}
    kept = [position[m.id] for m in new if m.id in position]
    fresh = [j for j, m in enumerate(new) if m.id not in position]
    last_kept = max((j for j, m in enumerate(new) if m.id in position), default=-1)
    by_id = len(position) == len(old) and kept == sorted(kept)
    # add_messages appends what it does not know: only new messages at the very end can go that way.
    if by_id and (not fresh or (not appended and min(fresh) > last_kept)):
        ids = {m.id for m in new}
        removed: list[BaseMessage] = [RemoveMessage(id=m.id) for m in old if m.id not in ids]  # type: ignore[arg-type]
        edited = [m for m in new if m.id in position and m is not old[position[m.id]]]
        return [*removed, *edited, *(new[j] for j in fresh)]
    return [RemoveMessage(id=REMOVE_ALL_MESSAGES), *new, *appended]


COMPACT_ATTEMPTS = 3
"""How many times `compact_thread` compacts a thread a run keeps moving on before it gives up."""

EXPECTED_CHECKPOINT = "historykit_expected_checkpoint"
"""The `configurable` key `SQLModelSaver.put` reads: the update is written only while the thread's
latest checkpoint is the one named (else `WriteConflictError`); other savers ignore it."""


def _anchored(config: RunnableConfig, snapshot: Any) -> RunnableConfig:
    """`config` pointing at the checkpoint `snapshot` was read from: the compaction of its messages is
    written after that checkpoint, and only while it is still the thread's latest (a saver that
    checks `EXPECTED_CHECKPOINT` refuses it once a run moved on; the others fork from it)."""
    read = dict(getattr(snapshot, "config", None) or {}).get("configurable") or {}
    checkpoint_id = read.get("checkpoint_id")
    if not checkpoint_id:
        return config
    configurable = {**(config.get("configurable") or {}), **read, EXPECTED_CHECKPOINT: checkpoint_id}
    return cast(RunnableConfig, {**config, "configurable": configurable})


def _moved_on(config: RunnableConfig) -> WriteConflictError:
    thread = (config.get("configurable") or {}).get("thread_id")
    return WriteConflictError(
        f"compact_thread: a run kept writing thread {thread!r} while it was compacted ({COMPACT_ATTEMPTS} "
        "attempts, each computed from a state the run had moved on from): nothing was written; compact "
        "it when the run is over, or with compact(focus, thread_id=...) at its next call"
    )


def _with_unique_ids(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    # New messages (a summary, a notice) come without an id, and a processor's merge may leave two
    # with one id: either would make add_messages append or replace the wrong message.
    seen: set[str] = set()
    out: list[BaseMessage] = []
    for msg in messages:
        if msg.id is None or msg.id in seen:
            msg = msg.model_copy(update={"id": str(uuid.uuid4())})
        seen.add(msg.id)  # type: ignore[arg-type]
        out.append(msg)
    return out


class _Glue(Glue):
    """What the hook and the middleware share: the pipeline, the window rule and the reports."""

    def __init__(
        self,
        processor: HistoryProcessor,
        context_window: int | None,
        on_report: Callable[[Report], None] | None,
        persist: bool,
        binds_thinking: bool | None = None,
        before_compaction: BeforeHook | None = None,
        after_compaction: AfterHook | None = None,
    ) -> None:
        self.pipeline = pipeline_of(processor)
        """The pipeline that runs (a single processor is wrapped in one)."""
        self.compaction_hooks = self._hooks(before_compaction, after_compaction)
        """Called around each compaction with a `historykit.BeforeCompaction` / `AfterCompaction`
        whose `conversation` is `("langgraph", thread_id, checkpoint_ns)`: the before-hook may veto
        it (`False`) or change the summary's focus (`historykit.AdjustCompaction`). Plain or async
        functions; an async one needs the graph's async entry points (`ainvoke`, `astream`)."""
        self.context_window = check_context_window(context_window)
        """The window to budget for; `None`: the model's profile's, else historykit's default."""
        self.on_report = on_report
        """Called with every call's report."""
        self.persist = check_bool("persist", persist)
        """Whether the edits are written to the graph state (see the module documentation)."""
        self.last_report: Report | None = None
        """The report of the latest call."""
        if binds_thinking is not None and not isinstance(binds_thinking, bool):
            raise ArgumentTypeError(f"binds_thinking must be True, False or None, got {binds_thinking!r}")
        self.binds_thinking = binds_thinking
        """Whether the model binds thinking to the history (R13); `None`: from the chat model's name,
        else from the model names on the messages."""
        self._manual: dict[str | None, ManualCompaction] = {}

    def compact(
        self, focus: str | None = None, *, keep_last: int | None = None, thread_id: str | None = None
    ) -> None:
        """Compact at the next model call, with an optional focus: Claude Code's `/compact <focus>`.

        The next call (in the thread `thread_id` when given, else in any) runs `Pipeline.compact`
        instead of the usual processing: its `Summarize` step summarizes now, a small history too,
        with the focus, and the marker records `automatic=False` and the focus. Persistent mode
        writes the compacted history to the state; view-only mode remembers it as that call's view.
        Later calls continue from it. To compact a stored thread without a model call, see
        `compact_thread`.

        Example:
            ```python
            middleware.compact("keep the details of the auth refactor", thread_id="t1")
            config = {"configurable": {"thread_id": "t1"}}
            agent.invoke({"messages": [("user", "Now the billing part")]}, config)
            ```
        """
        self._manual[None if thread_id is None else str(thread_id)] = ManualCompaction(focus, keep_last)

    def compact_thread(
        self,
        graph: Any,
        config: RunnableConfig,
        focus: str | None = None,
        *,
        keep_last: int | None = None,
        model: Any = None,
        as_node: str | None = None,
    ) -> Report:
        """Compact a stored thread now (persistent mode): its state's messages, through the graph.

        Reads the thread's messages (`graph.get_state(config)`), compacts them (`Pipeline.compact`,
        with the focus) and writes the result back with `graph.update_state` (an `add_messages`
        update, see `state_update`), so the checkpointer records it; with `SQLModelSaver` the
        transcript keeps every original message. The window is `context_window`, else `model`'s
        profile's, else the default. Returns the report. The next call of the thread continues
        from the compacted history.

        View-only mode keeps the state as the messages arrived: compact at the thread's next call
        instead (`compact(focus, thread_id=...)`); this raises `ValueError` then.

        Example:
            ```python
            config = {"configurable": {"thread_id": "t1"}}
            report = middleware.compact_thread(agent, config, "keep the details of the auth refactor")
            ```
        """
        for _ in range(COMPACT_ATTEMPTS):
            snapshot = graph.get_state(config)
            old, key = self._thread_messages(snapshot)
            result = self._compact_stored(old, config, focus, keep_last, model)
            update = state_update(old, result.messages)
            if not update:
                break
            try:
                graph.update_state(_anchored(config, snapshot), {key: update}, as_node=as_node)
                break
            except WriteConflictError:
                continue  # a run moved the thread on: compact what it holds now
        else:
            raise _moved_on(config)
        self._deliver(result)
        return result.report

    async def acompact_thread(
        self,
        graph: Any,
        config: RunnableConfig,
        focus: str | None = None,
        *,
        keep_last: int | None = None,
        model: Any = None,
        as_node: str | None = None,
    ) -> Report:
        """`compact_thread` for async graphs and checkpointers (`aget_state` / `aupdate_state`)."""
        for _ in range(COMPACT_ATTEMPTS):
            snapshot = await graph.aget_state(config)
            old, key = self._thread_messages(snapshot)
            self._check_persistent()
            neutral = _ADAPTER.to_neutral(old)
            call = self._call(model, self._stored(config), ManualCompaction(focus, keep_last))
            result = native_result(_ADAPTER, old, neutral, await self.pipeline.arun_call(neutral, call))
            update = state_update(old, result.messages)
            if not update:
                break
            try:
                await graph.aupdate_state(_anchored(config, snapshot), {key: update}, as_node=as_node)
                break
            except WriteConflictError:
                continue  # a run moved the thread on: compact what it holds now
        else:
            raise _moved_on(config)
        self._deliver(result)
        return result.report

    def _check_persistent(self) -> None:
        if not self.persist:
            raise InvalidArgumentError(
                "compact_thread rewrites the thread's state, which view-only mode (persist=False) keeps "
                "as the messages arrived: call compact(focus, thread_id=...) to compact at its next call"
            )

    def _thread_messages(self, snapshot: Any) -> tuple[list[BaseMessage], str]:
        key = getattr(self, "messages_key", "messages")
        values = getattr(snapshot, "values", None)
        messages = values.get(key) if isinstance(values, dict) else None
        if not isinstance(messages, list):
            raise InvalidArgumentError(
                f"the thread's state has no {key!r} list to compact (is the thread stored?)"
            )
        return list(messages), key

    def _compact_stored(
        self,
        old: list[BaseMessage],
        config: RunnableConfig,
        focus: str | None,
        keep_last: int | None,
        model: Any,
    ) -> PipelineResult[BaseMessage]:
        self._check_persistent()
        neutral = _ADAPTER.to_neutral(old)
        call = self._call(model, self._stored(config), ManualCompaction(focus, keep_last))
        return native_result(_ADAPTER, old, neutral, self.pipeline.run_call(neutral, call))

    def _binds(self, model: Any) -> bool | None:
        return self._binds_with(chat_model_binds_thinking(model) if self.binds_thinking is None else None)

    def _mode(self) -> Mode:
        return "persistent" if self.persist else "view"

    def _call(
        self, model: Any, where: _Where, manual: ManualCompaction | None = None, *, take_manual: bool = False
    ) -> Call:
        """The pipeline call of a model call of the conversation `where` names: everything looked up
        once, here (the window the conversation shrank to included); a manual compaction asked for
        its thread is used up when `take_manual`."""
        stated = chat_model_context_window(model) if self.context_window is None else None
        if take_manual:
            manual = self._take_manual(where.thread)
        return Call(
            self._window_with(stated, where.state),
            self._mode(),
            self._binds(model),
            where.state.key,
            manual,
            where.state,
            hooks=self.compaction_hooks,
        )

    def _process(self, messages: list[BaseMessage], model: Any, where: _Where) -> _Processed:
        call = self._call(model, where, take_manual=True)
        neutral = _ADAPTER.to_neutral(messages)
        result = native_result(_ADAPTER, messages, neutral, self.pipeline.run_call(neutral, call))
        self._deliver(result)
        return _Processed(messages, neutral, call, result)

    async def _aprocess(self, messages: list[BaseMessage], model: Any, where: _Where) -> _Processed:
        call = self._call(model, where, take_manual=True)
        neutral = _ADAPTER.to_neutral(messages)
        result = native_result(_ADAPTER, messages, neutral, await self.pipeline.arun_call(neutral, call))
        self._deliver(result)
        return _Processed(messages, neutral, call, result)

    def _where(self) -> _Where:
        """The conversation of the graph call this runs in, and its state."""
        thread, key = _conversation()
        return _Where(thread, self.pipeline.conversations.get(key))

    def _stored(self, config: RunnableConfig) -> _Where:
        """The conversation of the stored thread `config` names (`compact_thread`)."""
        configurable = config.get("configurable") or {}
        thread = configurable.get("thread_id")
        if thread is None:
            raise InvalidArgumentError("compact_thread needs config['configurable']['thread_id']")
        key = conversation_key("langgraph", str(thread), str(configurable.get("checkpoint_ns") or ""))
        return _Where(str(thread), self.pipeline.conversations.get(key))


class HistoryKitHook(_Glue, Runnable[Any, dict[str, Any]]):
    """A graph node that processes the state's messages: a `create_react_agent` pre-model hook.

    View only (default): returns `{"llm_input_messages": processed}`, which `create_react_agent`
    sends to the model instead of the state's messages; the state keeps everything. With
    `persist=True` it returns `{"messages": update}` (see `state_update`): the state shrinks; use it
    as a pre-model hook or as a node before the model node of your own `StateGraph`.

    Example:
        ```python
        from langgraph.graph import START, MessagesState, StateGraph
        from langgraph.prebuilt import create_react_agent
        from historykit.plugins.langchain import HistoryKitHook

        agent = create_react_agent(model, tools, pre_model_hook=HistoryKitHook(pipeline, model=model))

        builder = StateGraph(MessagesState)
        builder.add_node("compact", HistoryKitHook(pipeline, context_window=32_000, persist=True))
        builder.add_node("model", call_model)
        builder.add_edge(START, "compact")
        builder.add_edge("compact", "model")
        ```
    """

    def __init__(
        self,
        processor: HistoryProcessor,
        *,
        context_window: int | None = None,
        model: Any = None,
        persist: bool = False,
        on_report: Callable[[Report], None] | None = None,
        messages_key: str = "messages",
        binds_thinking: bool | None = None,
        before_compaction: BeforeHook | None = None,
        after_compaction: AfterHook | None = None,
    ) -> None:
        super().__init__(
            processor, context_window, on_report, persist, binds_thinking, before_compaction, after_compaction
        )
        self.model = model
        """The chat model whose profile gives the window when `context_window` is `None`."""
        self.messages_key = messages_key
        """The state key holding the messages."""

    __call__ = refuse_call(
        "HistoryKitHook is a LangGraph node (create_react_agent(..., pre_model_hook=...)); for Pydantic "
        "AI use historykit.plugins.pydantic_ai.HistoryKit (Agent(capabilities=[...])) or "
        "HistoryKitProcessor (history_processors=[...])"
    )

    def __repr__(self) -> str:
        return f"HistoryKitHook({self.pipeline!r}, persist={self.persist})"

    def _messages(self, state: Any) -> list[BaseMessage]:
        messages = (
            state.get(self.messages_key)
            if isinstance(state, dict)
            else getattr(state, self.messages_key, None)
        )
        if messages is None:
            raise InvalidArgumentError(f"the graph state has no {self.messages_key!r} key to process")
        return list(messages)

    def _update(self, old: list[BaseMessage], result: PipelineResult[BaseMessage]) -> dict[str, Any]:
        if self.persist:
            # The state keeps the compaction edits only; the repairs would go to the model with them,
            # but a node before the model node has no request of its own to put them in.
            return {self.messages_key: state_update(old, result.history)}
        return {"llm_input_messages": list(result.messages)}

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> dict[str, Any]:
        old = self._messages(input)
        return self._update(old, self._process(old, self.model, self._where()).result)

    async def ainvoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        old = self._messages(input)
        processed = await self._aprocess(old, self.model, self._where())
        return self._update(old, processed.result)


class HistoryKitState(AgentState):  # type: ignore[type-arg]
    """The agent state `HistoryKitMiddleware` adds to: in view-only mode the view last sent, the
    window the thread shrank to after a context overflow, and in persistent mode with recall the
    tool outputs its placeholders replaced.

    The checkpointer keeps it with the state, so a process that resumes the thread (a server
    loading it per request, another worker) continues from that view, budgets for that window and
    recalls those outputs. Private: not part of the agent's input or output.
    """

    historykit_view: NotRequired[Annotated[list[AnyMessage], PrivateStateAttr]]
    """The messages the last model call was sent, after the system message."""
    historykit_view_of: NotRequired[Annotated[int, PrivateStateAttr]]
    """How many of the request's messages (the system message aside) that view was derived from."""
    historykit_window: NotRequired[Annotated[int, PrivateStateAttr]]
    """The window the thread shrank to after a context overflow (both modes)."""
    historykit_originals: NotRequired[Annotated[dict[str, str], PrivateStateAttr]]
    """Persistent mode with recall: the tool outputs the thread's placeholders replaced, by handle."""
    historykit_level: NotRequired[Annotated[int, PrivateStateAttr]]
    """The usage-warning level the thread's last call reached (`historykit.UsageWarning`): a warning comes
    once per crossing in a run without a checkpointer and in another process too."""


class HistoryKitMiddleware(_Glue, AgentMiddleware):  # type: ignore[misc]
    """LangChain v1 agent middleware (`create_agent(middleware=[...])`) that processes every model call.

    It wraps the model call (`wrap_model_call` / `awrap_model_call`): the system message and the
    messages are processed together, and the model is sent the result. View only (default) edits
    nothing else. With `persist=True` the edits are also written to the agent state, as a command
    applied after the model node (the response is kept after them), so the state and its
    checkpoints shrink. Put it first in `middleware=` in persistent mode, so that what it writes
    back is the state as stored, not another middleware's view of it.

    In view-only mode the view each call was sent goes into the state too (`HistoryKitState`,
    private keys the checkpointer stores; `SQLModelSaver` stores each of its messages once), so a new
    process resuming the thread continues from it: its first call costs what a warm call costs
    instead of a replay of the whole conversation.

    One middleware serves any number of threads at once: what it keeps between calls belongs to
    the thread (its `thread_id`, of any type, and the graph's checkpoint namespace), in the graph
    state and in the pipeline's conversation states (`historykit._conversations`). A graph run
    without a checkpointer is a conversation of its own.

    Example:
        ```python
        from langchain.agents import create_agent
        from historykit.plugins.langchain import HistoryKitMiddleware

        agent = create_agent(model, tools, middleware=[HistoryKitMiddleware(pipeline, persist=True)])
        HistoryKitMiddleware(pipeline, after_compaction=lambda event: print(event.summary))
        ```
    """

    def __init__(
        self,
        processor: HistoryProcessor,
        *,
        context_window: int | None = None,
        persist: bool = False,
        on_report: Callable[[Report], None] | None = None,
        binds_thinking: bool | None = None,
        recall: Recall | bool = False,
        before_compaction: BeforeHook | None = None,
        after_compaction: AfterHook | None = None,
    ) -> None:
        super().__init__(
            processor, context_window, on_report, persist, binds_thinking, before_compaction, after_compaction
        )
        if self.persist and _ExtendedModelResponse is None:  # pragma: no cover - old langchain 1.x
            raise ImportError("persistent mode needs a langchain with ExtendedModelResponse (1.2 or later)")
        self.recall = recall_option(recall)
        """The recall tool's settings (`historykit.Recall`), `None` when it is not installed."""
        self.tools = []
        if self.recall is not None:
            # Persistent mode replaces an image in the graph state: only the saver's log has it then
            # (it logs every message as the graph checkpoints it).
            self.recall.install(
                self.pipeline.processors, media=not self.persist or self.recall.store is not None
            )
            self.tools = [_recall_tool(self.recall, self)]
            if self.recall.search:
                self.tools.append(_search_tool(self.recall, self))

    state_schema = HistoryKitState

    __call__ = refuse_call(
        "HistoryKitMiddleware is LangChain middleware (create_agent(..., middleware=[...])); for Pydantic "
        "AI use historykit.plugins.pydantic_ai.HistoryKit (Agent(capabilities=[...])) or "
        "HistoryKitProcessor (history_processors=[...])"
    )

    def __repr__(self) -> str:
        return f"HistoryKitMiddleware({self.pipeline!r}, persist={self.persist})"

    def _resume(self, request: ModelRequest, where: _Where) -> None:
        """What the thread's state kept and this conversation's state may not know (a new process,
        another worker, a run without a checkpointer): the window it shrank to, its usage-warning
        level, and in view-only mode the view last sent, remembered so that this call continues
        from it rather than replay the whole conversation. A view this process put there itself is
        known already."""
        state = request.state if isinstance(request.state, dict) else {}
        stored = state.get("historykit_window")
        if isinstance(stored, int) and stored > 0 and where.state.window is None:
            where.state.window = stored
        level = state.get("historykit_level")
        if isinstance(level, int) and not isinstance(level, bool):
            where.state.usage_level = level
        if self.persist:
            return
        view, of = state.get("historykit_view"), state.get("historykit_view_of")
        if not isinstance(view, list) or not isinstance(of, int) or not 0 < of <= len(request.messages):
            return
        if view is where.state.sent:
            return
        system = [request.system_message] if request.system_message is not None else []
        derived_from = _ADAPTER.to_neutral([*system, *request.messages[:of]])
        call = self._call(request.model, where)
        self.pipeline.remember_neutral_view(derived_from, _ADAPTER.to_neutral([*system, *view]), call)

    @staticmethod
    def _split(request: ModelRequest, processed: Sequence[BaseMessage]) -> ModelRequest:
        processed = list(processed)
        history = HistoryKitMiddleware._history(request)
        if len(processed) == len(history) and all(a is b for a, b in zip(processed, history)):
            # Nothing changed: the request as it came, its messages list the very one LangChain made,
            # so what a later middleware does to it (`request.messages.append(...)`) has the effect it
            # has without historykit.
            return request
        if request.system_message is not None and processed and isinstance(processed[0], SystemMessage):
            return request.override(system_message=processed[0], messages=cast(Any, processed[1:]))
        return request.override(messages=cast(Any, processed))

    @staticmethod
    def _history(request: ModelRequest) -> list[BaseMessage]:
        system = [request.system_message] if request.system_message is not None else []
        return [*system, *request.messages]

    def _finish(
        self,
        request: ModelRequest,
        kept: list[BaseMessage],
        response: Any,
        where: _Where,
        originals: dict[str, str],
    ) -> Any:
        """The response, with the state update this call makes: in persistent mode the compaction
        edits, `kept` (and with recall, the originals its placeholders replaced); in view-only mode
        the view the next call continues from, `kept` too; in both the window the thread shrank
        to after an overflow."""
        state = request.state if isinstance(request.state, dict) else {}
        update: dict[str, Any] = {}
        shrunk = where.state.window
        if shrunk is not None and state.get("historykit_window") != shrunk:
            update["historykit_window"] = shrunk
        if state.get("historykit_level", 0) != where.state.usage_level:
            update["historykit_level"] = where.state.usage_level
        if isinstance(response, AIMessage):
            response = ModelResponse(result=[response])
        if not self.persist:
            view = list(kept)
            update["historykit_view"], update["historykit_view_of"] = view, len(request.messages)
            where.state.sent = view
        else:
            if not isinstance(state.get("messages"), list):
                raise InvalidArgumentError(
                    "persistent mode needs the agent state's 'messages' list in the model request"
                )
            old = state["messages"]
            # The request's messages are the state's unless LangChain patched dangling tool calls: then
            # the update replaces everything rather than guess which ids the patch gave.
            same = len(old) == len(request.messages) and all(a is b for a, b in zip(old, request.messages))
            edits = state_update(old if same else [], kept, appended=response.result)
            if edits:
                update["messages"] = edits
        if originals and self.recall is not None:
            # Persistent mode's placeholders replaced these; in both modes, a summary's index of
            # the outputs it had no room for is here and nowhere else.
            stored = state.get("historykit_originals")
            known: dict[str, str] = dict(stored) if isinstance(stored, dict) else {}
            known.update(originals)
            update["historykit_originals"] = dict(list(known.items())[-self.recall.max_originals :])
        if not update or _ExtendedModelResponse is None:  # pragma: no cover - old langchain 1.x
            return response
        return _ExtendedModelResponse(model_response=response, command=Command(update=update))

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> Any:
        where = self._where()
        self._resume(request, where)
        done = self._process(self._history(request), request.model, where)
        result = done.result
        originals = dict(result.originals)
        sent, kept, given = self._sent_and_kept(request, result)
        try:
            response = handler(sent)
        except Exception as error:
            retried = recompact(
                self.pipeline, done.neutral, error, done.call, _ADAPTER.to_neutral(self._history(sent))
            )
            if retried is None:
                raise
            result = self._deliver(native_result(_ADAPTER, done.given, done.neutral, retried))
            originals.update(result.originals)
            sent, kept, given = self._sent_and_kept(request, result)
            response = handler(sent)  # once: a second failure is raised
        kept = self._with_appended(request, sent, given, kept)
        return self._finish(request, kept, response, where, originals)

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> Any:
        where = self._where()
        self._resume(request, where)
        done = await self._aprocess(self._history(request), request.model, where)
        result = done.result
        originals = dict(result.originals)
        sent, kept, given = self._sent_and_kept(request, result)
        try:
            response = await handler(sent)
        except Exception as error:
            rejected = _ADAPTER.to_neutral(self._history(sent))
            retried = await arecompact(self.pipeline, done.neutral, error, done.call, rejected)
            if retried is None:
                raise
            result = self._deliver(native_result(_ADAPTER, done.given, done.neutral, retried))
            originals.update(result.originals)
            sent, kept, given = self._sent_and_kept(request, result)
            response = await handler(sent)  # once: a second failure is raised
        kept = self._with_appended(request, sent, given, kept)
        return self._finish(request, kept, response, where, originals)

    def _sent_and_kept(
        self, request: ModelRequest, result: PipelineResult[BaseMessage]
    ) -> tuple[ModelRequest, list[BaseMessage], int]:
        """The request the model is sent (the view, repairs and the provider's block in), the
        messages the state keeps of this call, the system message aside (the compaction edits), and
        how many messages the request sent holds before the handler runs."""
        sent = with_provider_compaction(self._split(request, result.messages))
        return sent, list(self._split(request, result.history).messages), len(sent.messages)

    @staticmethod
    def _with_appended(
        request: ModelRequest, sent: ModelRequest, given: int, kept: list[BaseMessage]
    ) -> list[BaseMessage]:
        """`kept`, then what a later middleware appended to the request it was handed
        (`request.messages.append(...)`): without historykit that list is the state's own, so the
        message reaches the state. When this call handed on a list of its own, the message is
        appended to the request's list too, as LangChain's list would have it."""
        extra = list(sent.messages[given:])
        if extra and sent.messages is not request.messages:
            request.messages.extend(extra)
        return [*kept, *extra]


@dataclass(frozen=True)
class _Where:
    """The conversation a graph call belongs to: its thread (as the user names it in `compact`),
    and the pipeline's state of it."""

    thread: str | None
    state: ConversationState


@dataclass(frozen=True)
class _Processed:
    """One pipeline call of a model call: its native and neutral input, the call, the result."""

    given: list[BaseMessage]
    neutral: list[Message]
    call: Call
    result: PipelineResult[BaseMessage]


def _recall_tool(recall: Recall, middleware: HistoryKitMiddleware) -> Any:
    """The recall tool for `create_agent`: the original output a placeholder's handle names, looked
    up in the thread's own graph state (its messages, and the originals persistent mode kept there),
    the pipeline's state of the thread and the store; never in another conversation."""
    from langchain.tools import ToolRuntime
    from langchain_core.tools import StructuredTool

    def where(runtime: ToolRuntime) -> dict[str, Any]:
        return _sources(runtime, middleware)

    # An image `ClearMedia` removed comes back as its content block (the tool message then holds it).
    def media_key(handle: str, found: dict[str, Any]) -> str | None:
        # The store is read for an image only when no text output of the thread has the handle.
        known = isinstance(handle, str) and Recall._known(
            handle, found["state"], found["kept"], found["history"]
        )
        return None if known else found["store_key"]

    def recall_output(
        handle: str,
        runtime: ToolRuntime,
        offset: int = 0,
        start_line: int | None = None,
        end_line: int | None = None,
        grep: str | None = None,
    ) -> Any:
        found = where(runtime)
        media = recall.media(handle, history=found["history"], store_key=media_key(handle, found))
        if media is not None:
            return [media.native]
        return recall.lookup(handle, offset, start_line, end_line, grep, **found)

    async def arecall_output(
        handle: str,
        runtime: ToolRuntime,
        offset: int = 0,
        start_line: int | None = None,
        end_line: int | None = None,
        grep: str | None = None,
    ) -> Any:
        found = where(runtime)
        media = await recall.amedia(handle, history=found["history"], store_key=media_key(handle, found))
        if media is not None:
            return [media.native]
        return await recall.alookup(handle, offset, start_line, end_line, grep, **found)

    # This module postpones annotations; the tool reads them to find its arguments and the runtime.
    for function in (recall_output, arecall_output):
        function.__annotations__ = {
            "handle": str,
            "runtime": ToolRuntime,
            "offset": int,
            "start_line": int | None,
            "end_line": int | None,
            "grep": str | None,
            "return": Any,
        }
    return StructuredTool.from_function(
        func=recall_output, coroutine=arecall_output, name=recall.name, description=recall.description
    )


def _sources(runtime: Any, middleware: HistoryKitMiddleware) -> dict[str, Any]:
    """Where the recall and search tools look, for the thread the tool runs in: the pipeline's state
    of the thread, the originals persistent mode kept in the graph state, the graph state's
    messages, and the thread's key in the store."""
    thread, key = _conversation(cast(RunnableConfig, runtime.config or {}))
    state = runtime.state
    get = state.get if isinstance(state, dict) else lambda name: getattr(state, name, None)
    messages = get("messages")
    kept = get("historykit_originals")
    return {
        "state": middleware.pipeline.conversations.get(key) if key is not None else None,
        "kept": kept if isinstance(kept, dict) else None,
        "history": _ADAPTER.to_neutral(list(messages or ())),
        "store_key": thread if key is not None else None,
    }


def _search_tool(recall: Recall, middleware: HistoryKitMiddleware) -> Any:
    """The search tool for `create_agent` (`Recall.search`): the parts of the thread's own transcript
    that contain a text, in pages; never another conversation's."""
    from langchain.tools import ToolRuntime
    from langchain_core.tools import StructuredTool

    def search_history(query: str, runtime: ToolRuntime, page: int = 1) -> str:
        return recall.find(query, page, **_sources(runtime, middleware))

    async def asearch_history(query: str, runtime: ToolRuntime, page: int = 1) -> str:
        return await recall.afind(query, page, **_sources(runtime, middleware))

    # This module postpones annotations; the tool reads them to find its arguments and the runtime.
    for function in (search_history, asearch_history):
        function.__annotations__ = {"query": str, "runtime": ToolRuntime, "page": int, "return": str}
    return StructuredTool.from_function(
        func=search_history,
        coroutine=asearch_history,
        name=recall.search_name,
        description=recall.search_description,
    )


def with_provider_compaction(request: ModelRequest) -> ModelRequest:
    """The request as sent: the latest summary a native backend of this chat model's provider wrote
    is replaced by the provider's own block (`historykit.plugins.native_compaction`).

    `ChatAnthropic` gets Anthropic's signed block and `ChatOpenAI` on the Responses API OpenAI's
    encrypted item, each as an `AIMessage` holding the block, in place of the summary and of every
    message before it (the block stands for them: Anthropic ignores what precedes it, OpenAI would
    bill it); Anthropic's beta header joins the model's betas. Any other chat model, and a summary
    of another provider, get the summary text. What is stored is the processed history, not this.
    """
    provider = _native_provider(request.model)
    if provider is None:
        return request
    messages = list(request.messages)
    for index in range(len(messages) - 1, -1, -1):
        compaction = ProviderCompaction.from_dict(
            messages[index].additional_kwargs.get(PROVIDER_COMPACTION_KEY)
        )
        if compaction is None or compaction.provider != provider:
            continue
        block = AIMessage(content=[compaction.block_dict()], response_metadata={"model_provider": provider})
        settings = dict(request.model_settings)
        if provider == "anthropic":
            betas = [*(getattr(request.model, "betas", None) or []), *(settings.get("betas") or [])]
            settings["betas"] = [*dict.fromkeys([*betas, ANTHROPIC_COMPACTION_BETA])]
        return request.override(messages=cast(Any, [block, *messages[index + 1 :]]), model_settings=settings)
    return request


def _native_provider(model: Any) -> str | None:
    """Whose compaction blocks `model` sends natively: Anthropic's for `ChatAnthropic`, OpenAI's for
    `ChatOpenAI` on the Responses API; `None` for any other chat model."""
    names = [f"{c.__module__}.{c.__qualname__}" for c in type(model).__mro__]
    if any(n.startswith("langchain_anthropic.") for n in names):
        return "anthropic"
    if any(n.startswith("langchain_openai.") for n in names):
        uses = getattr(model, "_use_responses_api", None)
        responses = uses({}) if callable(uses) else bool(getattr(model, "use_responses_api", False))
        return "openai" if responses else None
    return None


def _conversation(config: RunnableConfig | None = None) -> tuple[str | None, tuple[object, ...] | None]:
    """The thread a graph call runs in, as its checkpointer names it (`str(thread_id)`: LangGraph
    accepts any type), and the conversation's key: the thread with the graph's checkpoint namespace
    (a subgraph agent is a conversation of its own). Without a checkpointer nothing is stored under
    the thread id, so the call is a conversation of its own: no key. `config`: the graph's (from
    `langgraph.config.get_config` when not given); outside a graph, no thread and no key."""
    if config is None:
        from langgraph.config import get_config

        try:
            config = get_config()
        except RuntimeError:  # called outside a graph
            return None, None
    configurable = config.get("configurable") or {}
    thread = configurable.get("thread_id")
    if thread is None or configurable.get("__pregel_checkpointer") is None:
        return None, None
    # A node's namespace is its graph's plus its own `name:task` segment.
    namespace = str(configurable.get("checkpoint_ns") or "").rpartition("|")[0]
    return str(thread), conversation_key("langgraph", str(thread), namespace)
