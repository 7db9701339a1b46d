"""historykit processors inside Pydantic AI agents (1.x and 2.x).

Any processor or pipeline is already a Pydantic AI history processor: `Agent(history_processors=
[pipeline])` works in 1.x as it is (Pydantic AI calls it on a worker thread with the messages alone,
so it budgets with historykit's default window). This module adds what a plain callable cannot:

- `HistoryKit(processor, context_window=None, on_report=None, persist=True)`: a capability, for
  `Agent(capabilities=[HistoryKit(...)])` in Pydantic AI 2.x (which removed `history_processors=`)
  and in the 1.x versions that have capabilities.
- `HistoryKitProcessor(processor, context_window=None, on_report=None)`: a history processor that
  takes the run context, for `Agent(history_processors=[...])` in 1.x.

Both run the pipeline with `arun` on the agent's event loop (a `Summarize` summarizer is awaited,
not run on a thread), take the context window from the run's model when none is given, hand every
call's report to `on_report`, keep the latest one in `last_report`, and log it at debug level (the
`historykit` logger, when the call changed something).

The context window, in order: the `context_window` you give (`explicit`); else the run's model:
`Model.context_window` in 2.x (its profile's `context_window`, which Pydantic AI fills in from
genai-prices for known models: `model profile`), or in 1.x, whose profiles have no window, the same
genai-prices table looked up by model name and provider (`genai-prices`); else historykit's
conservative default (`default`). The report's `window_source` says which.

What each mode keeps:

- `persist=True` (the default; `HistoryKitProcessor` always): the model is sent the processed
  history, and it becomes the run's history (`result.all_messages()`): edits, removals and summaries
  are kept, and later calls (and runs given that history) start from them. `HistoryKit` keeps the
  compaction edits only (`PipelineResult.history`), the provider-rule repairs going into the request
  alone; `HistoryKitProcessor` keeps the repairs too, since a history processor's one list is both
  sent and kept.
- `persist=False` (view only): the model is sent the processed history; the run's history keeps
  every message, unedited; the view is derived from it (`historykit._view`).

Persistent is what Pydantic AI's own history processors do. View-only works on both majors (2.x
from `before_model_request`, whose messages are the request's alone there; 1.x from
`wrap_model_request`, since 1.x writes `before_model_request`'s messages back to the history).
Both modes send the model the same view on every call, append-only between compactions, so the
provider's prompt cache keeps hitting; on a model that binds thinking (its profile's
`anthropic_binds_thinking_blocks`, its name, or `binds_thinking=`), thinking after an edit is
dropped (`historykit.BINDING_MODELS`).

Compact and retry (`HistoryKit`): when the provider refuses a request as too long for its context
window, the pipeline runs again on the same input with a smaller window and the model is called
once more (2.x: another attempt of the request step; 1.x: `wrap_model_request` calls the model
again), see `historykit.plugins._overflow`. The report of the retry has an `OverflowRetry` step and
marker; a second refusal reaches the caller as Pydantic AI raised it. `HistoryKitProcessor` cannot
retry.

Manual compaction (both): `compact(focus)` makes the next model request run `Pipeline.compact`
(summarize now, with the focus; the marker records `automatic=False`), in either mode;
`HistoryKit.compact_conversation` compacts a stored Pydantic AI `Conversation` at once (persistent
mode), to save in a `ConversationStore`.

Compaction hooks (both): `before_compaction=` and `after_compaction=` are called around each
compaction with a `historykit.BeforeCompaction` / `historykit.AfterCompaction` whose `conversation`
is `("pydantic-ai", conversation_id)` (the run's `run_id` when it has none): the before-hook may veto
the compaction (`False`) or change the summary's focus (`historykit.AdjustCompaction`); plain or
async functions (`historykit._hooks`).

Recall (`HistoryKit(..., recall=True)`, `historykit.Recall`): the capability adds a `recall` tool
that gives a cleared tool output back by the handle its placeholder names, from the run's history
(view-only), the originals it kept (persistent) or the `Recall.store`'s transcript.

Example:
    ```python
    from pydantic_ai import Agent
    from historykit import Pipeline
    from historykit.plugins.pydantic_ai import HistoryKit
    from historykit.processors import ClearToolResults, PairwiseTruncate, Repair

    kit = HistoryKit(Pipeline([ClearToolResults(), PairwiseTruncate(), Repair()]), on_report=print)
    agent = Agent("anthropic:claude-sonnet-4-5", capabilities=[kit])
    result = await agent.run("Fix the failing test")
    kit.last_report  # the latest call's report
    ```
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import Any, TypeVar

from pydantic_ai import messages as _pai_messages
from pydantic_ai.messages import ModelMessage
from pydantic_ai.tools import RunContext

from historykit import _provenance as provenance
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
from historykit._transcript_search import Hit
from historykit._validate import check_bool
from historykit._view import Mode
from historykit.errors import InvalidArgumentError
from historykit.plugins._glue import Glue, WrongFramework, pipeline_of
from historykit.plugins._overflow import arecompact, context_overflow
from historykit.plugins.pydantic_ai._adapter import PromptItem, PydanticAIAdapter
from historykit.plugins.pydantic_ai._durable import (
    Engine,
    LastViews,
    RecompactRequest,
    ViewRequest,
    ViewResult,
    durable_engine,
    refuse_background,
)

_F = TypeVar("_F")

try:
    from pydantic_ai.capabilities import AbstractCapability as _AbstractCapability
except ImportError:  # pragma: no cover - Pydantic AI 1.x before capabilities: only HistoryKitProcessor
    _AbstractCapability = None  # type: ignore[assignment,misc]

try:
    from pydantic_ai.capabilities import durable_operation as _durable_operation
except ImportError:  # pragma: no cover - a Pydantic AI without durable operations: they run in place

    def _durable_operation(name: str) -> Callable[[_F], _F]:  # type: ignore[misc]
        return lambda method: method


try:
    from pydantic_ai.exceptions import RetryModelRequest as _RetryModelRequest
except ImportError:  # pragma: no cover - Pydantic AI 1.x: no attempts to retry a request step with
    _RetryModelRequest = None  # type: ignore[assignment,misc]


logger = logging.getLogger("historykit")

_CapabilityBase: Any = _AbstractCapability[Any] if _AbstractCapability is not None else object

_BEFORE_HOOK_IS_REQUEST_ONLY = _AbstractCapability is not None and hasattr(
    _AbstractCapability, "prepare_model_request"
)
"""Feature check: with `prepare_model_request` (2.x) came request-only `before_model_request` messages
(history changes go through `RunContext.messages`); before it (1.x) the framework wrote the messages
`before_model_request` returned back to the run's history."""

_RETRY_BY_ATTEMPT = _RetryModelRequest is not None and _BEFORE_HOOK_IS_REQUEST_ONLY
"""Feature check: how compact-and-retry calls the model again. 2.x: `on_model_request_error` raises
`RetryModelRequest` and `prepare_model_request` sends the retried view (`wrap_model_request` may
call its handler only once there). 1.x capabilities have no attempts: `wrap_model_request` calls
its handler a second time."""


def _served_models(model: Any) -> list[Any]:
    """The models that may actually answer a request sent to `model`, in the order they are tried.

    A wrapper (`WrapperModel`: `InstrumentedModel`, a durable engine's model, your own) is seen
    through to the model it sends to; a `FallbackModel` stands for its candidates, each seen through
    in turn (a nested one flattened). Any other model is its own.
    """
    out: list[Any] = []
    pending = [model]
    seen: set[int] = set()
    while pending:
        current = pending.pop(0)
        if id(current) in seen:  # pragma: no cover - a wrapper that wraps itself
            continue
        seen.add(id(current))
        # `vars()`, not `getattr`: a `WrapperModel` forwards unknown attributes to the model it wraps.
        own = vars(current) if hasattr(current, "__dict__") else {}
        wrapped = own.get("wrapped")
        candidates = own.get("models")
        if wrapped is not None and _is_model(wrapped):
            pending.insert(0, wrapped)
        elif isinstance(candidates, list) and candidates and all(_is_model(m) for m in candidates):
            pending[:0] = candidates
        else:
            out.append(current)
    return out


def _is_model(value: object) -> bool:
    try:
        from pydantic_ai.models import Model
    except ImportError:  # pragma: no cover - Pydantic AI is what calls this
        return False
    return isinstance(value, Model)


def model_context_window(model: Any) -> ContextWindow | None:
    """The context window a Pydantic AI model states about itself, with its source; `None` if unknown.

    For a wrapper, the window of the model it sends to; for a `FallbackModel`, the smallest window
    among its candidates (any of them may answer, and a history that fits the smallest fits them all:
    Pydantic AI's own `FallbackModel.context_window`), ignoring candidates with no known window.

    Example:
        ```python
        from pydantic_ai.models.function import FunctionModel
        from historykit.plugins.pydantic_ai import model_context_window

        model_context_window(FunctionModel(my_function, profile={"context_window": 8_000}))  # 2.x
        # ContextWindow(tokens=8000, source='model profile')
        ```
    """
    windows = [w for m in _served_models(model) if (w := _own_context_window(m)) is not None]
    return min(windows, key=lambda w: w.tokens) if windows else None


def _own_context_window(model: Any) -> ContextWindow | None:
    stated = getattr(model, "context_window", None)
    if isinstance(stated, int) and not isinstance(stated, bool) and stated > 0:
        return ContextWindow(stated, "model profile")
    if hasattr(type(model), "context_window"):
        # 2.x: the profile (with genai-prices' data folded in) does not know this model.
        return None
    known = _genai_prices_window(model)
    return ContextWindow(known, "genai-prices") if known is not None else None


def model_binds_thinking_blocks(model: Any) -> bool | None:
    """Whether a Pydantic AI model binds replayed thinking to the history (R13, `historykit.BINDING_MODELS`).

    The profile flag `anthropic_binds_thinking_blocks` (Pydantic AI 2.68 and later) when the profile
    has it; else the model's name; `None` for no model (the messages' model names then decide). For a
    wrapper, the model it sends to; for a `FallbackModel`, `True` when any candidate binds: the
    thinking a binding candidate would be sent after an edit is invalid there, and a candidate of
    another provider is never sent it (Pydantic AI drops another provider's thinking).
    """
    if model is None:
        return None
    verdicts = [_own_binding(m) for m in _served_models(model)]
    return any(verdicts) if verdicts else None


def _own_binding(model: Any) -> bool:
    try:
        profile = getattr(model, "profile", None)
    except NotImplementedError:  # pragma: no cover - a model with no profile of its own that is no wrapper
        profile = None
    flag = profile.get("anthropic_binds_thinking_blocks") if isinstance(profile, dict) else None
    if flag is None and profile is not None and not isinstance(profile, dict):
        flag = getattr(profile, "anthropic_binds_thinking_blocks", None)
    if isinstance(flag, bool) and flag:
        return True
    name = getattr(model, "model_name", None)
    return model_binds_thinking(name) if isinstance(name, str) else bool(flag)


_KNOWN_WINDOWS: dict[tuple[str, str, str | None], int | None] = {}


def _genai_prices_window(model: Any) -> int | None:
    """1.x: look the model up in genai-prices (a dependency of pydantic-ai-slim), as 2.x profiles do."""
    name, provider = getattr(model, "model_name", None), getattr(model, "system", None)
    if not isinstance(name, str) or not isinstance(provider, str):
        return None
    try:
        base_url = model.base_url
    except Exception:
        # Some models have no URL until their client exists; the provider name is enough to match.
        base_url = None
    key = (name, provider, base_url if isinstance(base_url, str) else None)
    if key not in _KNOWN_WINDOWS:
        _KNOWN_WINDOWS[key] = _lookup_genai_prices(*key)
    return _KNOWN_WINDOWS[key]


def _lookup_genai_prices(name: str, provider: str, base_url: str | None) -> int | None:
    try:
        from genai_prices.data_snapshot import get_snapshot
    except ImportError:
        return None
    # The API URL names a reseller more precisely than the provider name, so it is tried first.
    for provider_id, api_url in ((None, base_url), (provider, None)):
        if provider_id is None and api_url is None:
            continue
        try:
            _, info = get_snapshot().find_provider_model(
                name, provider=None, provider_id=provider_id, provider_api_url=api_url
            )
        except LookupError:
            continue
        window = getattr(info, "context_window", None)
        return window if isinstance(window, int) and window > 0 else None
    return None


_ADAPTER = PydanticAIAdapter()
"""The one adapter every call converts with, once in and once out."""

_KIND = "pydantic-ai"
"""The kind of the conversation keys this package makes (`historykit._conversations.conversation_key`)."""


class _Glue(Glue):
    """What both entry points share: the pipeline, the window rule and the report delivery."""

    mode: Mode = "persistent"

    def compact(
        self, focus: str | None = None, *, keep_last: int | None = None, conversation: str | None = None
    ) -> None:
        """Compact at the next model request, with an optional focus: Claude Code's `/compact <focus>`.

        The next request (of `conversation`, a run's `conversation_id`, when given; else of any run)
        runs `Pipeline.compact` instead of the usual call: its `Summarize` step summarizes now, a
        small history too, with the focus, and the marker records `automatic=False` and the focus.
        In persistent mode the compacted history becomes the run's; in view-only mode the pipeline
        remembers it as that call's view. Later calls continue from it. In a server that serves
        many users, always name the `conversation`: without it the next request of any user compacts.

        Example:
            ```python
            kit.compact("keep the details of the auth refactor", conversation=conversation_id)
            result = await agent.run("Now the billing part", message_history=history)
            ```
        """
        self._manual[conversation] = ManualCompaction(focus, keep_last)

    def state_of(self, conversation: str | None) -> ConversationState:
        """What the pipeline keeps for a Pydantic AI conversation (its `conversation_id`); a state of
        its own for a run that names none."""
        return self.pipeline.conversations.get(conversation_key(_KIND, conversation))

    def window_for(self, model: Any, conversation: str | None = None) -> ContextWindow:
        stated = model_context_window(model) if self.context_window is None else None
        return self._window_with(stated, self.state_of(conversation))

    def binds_for(self, model: Any) -> bool | None:
        return self._binds_with(model_binds_thinking_blocks(model) if self.binds_thinking is None else None)

    def call_for(self, model: Any, conversation: str | None, manual: ManualCompaction | None = None) -> Call:
        """The pipeline call of a model request: everything looked up once, here."""
        return Call(
            self.window_for(model, conversation),
            self.mode,
            self.binds_for(model),
            conversation_key(_KIND, conversation),
            manual,
            hooks=self.compaction_hooks,
        )

    async def process(
        self, messages: Sequence[ModelMessage], model: Any, conversation: str | None = None
    ) -> tuple[PipelineResult[ModelMessage], list[Message], Call]:
        """The request's view: the result (native), and the neutral input and call a retry reuses."""
        given = list(messages)
        call = self.call_for(model, conversation, self._take_manual(conversation))
        neutral = _ADAPTER.to_neutral(given)
        result = native_result(_ADAPTER, given, neutral, await self.pipeline.arun_call(neutral, call))
        self._deliver(result)
        return result, neutral, call


@dataclass
class HistoryKit(_CapabilityBase, _Glue):  # type: ignore[misc]
    """A Pydantic AI capability that runs a historykit processor before every model request.

    See the module documentation for what `persist=True` and `persist=False` keep.

    Example:
        ```python
        from pydantic_ai import Agent
        from historykit import Pipeline
        from historykit.plugins.pydantic_ai import HistoryKit
        from historykit.processors import ClearToolResults, Repair, Summarize

        reports = []
        kit = HistoryKit(Pipeline([ClearToolResults(), Summarize(), Repair()]), on_report=reports.append)
        agent = Agent("openai:gpt-4o", capabilities=[kit])       # window: gpt-4o's, from its profile
        HistoryKit(pipeline, context_window=32_000, persist=False)  # explicit window, view only
        HistoryKit(pipeline, before_compaction=lambda event: False)  # veto every compaction
        ```
    """

    wrap_tool_call = WrongFramework(
        "HistoryKit is a Pydantic AI capability (Agent(capabilities=[...])); for LangChain use "
        "historykit.plugins.langchain.HistoryKitMiddleware (create_agent(..., middleware=[...])) or "
        "HistoryKitHook (create_react_agent(..., pre_model_hook=...))"
    )
    """Read by LangChain's `create_agent` off each middleware's class: a clear error for the mix-up."""

    processor: HistoryProcessor
    """A processor or a `Pipeline` (a single processor runs as a one-step pipeline)."""
    context_window: int | None = None
    """The window to budget for; `None`: the run's model's, else historykit's default."""
    on_report: Callable[[Report], None] | None = None
    """Called with every call's report."""
    persist: bool = True
    """`True`: the processed history becomes the run's history; `False`: only the request sees it."""
    binds_thinking: bool | None = None
    """Whether the model binds thinking to the history (R13); `None`: from the run's model (its
    profile's `anthropic_binds_thinking_blocks`, else its name)."""
    recall: Recall | bool = False
    """`True` or a `Recall`: add the recall tool, and make placeholders name it with a handle
    (`historykit.Recall`); `False`: placeholders say "call the tool again"."""
    _: KW_ONLY
    id: str | None = "historykit"
    """The capability's stable identity within an agent (Pydantic AI's `AbstractCapability.id`):
    durable engines name its operations after it (`historykit.plugins.pydantic_ai._durable`), and
    the recall toolset's `id` is derived from it (`"<id>_recall"`). Give each `HistoryKit` of one
    agent its own; never change it while runs of the agent may be recovered."""
    before_compaction: BeforeHook | None = None
    """Called before each compaction with a `historykit.BeforeCompaction` (its `conversation` is
    `("pydantic-ai", conversation_id)`): return `False` to veto it, `historykit.AdjustCompaction` to
    change the summary's focus, `None` to let it proceed; plain or async (`historykit._hooks`).
    Under a durable engine it runs inside the request's durable unit, once (a replay reuses the
    recorded view)."""
    after_compaction: AfterHook | None = None
    """Called after each compaction with a `historykit.AfterCompaction`: sizes, markers, summary."""
    last_report: Report | None = field(default=None, init=False, repr=False, compare=False)
    """The report of the latest call."""
    _manual: dict[str | None, ManualCompaction] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _steps: dict[tuple[str | None, int], _Step] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _recall: Recall | None = field(default=None, init=False, repr=False, compare=False)
    _last_views: LastViews = field(default_factory=LastViews, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if _AbstractCapability is None:  # pragma: no cover - Pydantic AI 1.x before capabilities
            raise ImportError(
                "this Pydantic AI has no capabilities: use HistoryKitProcessor in history_processors=[...]"
            )
        self.pipeline = pipeline_of(self.processor)
        self.compaction_hooks = self._hooks(self.before_compaction, self.after_compaction)
        self.mode = "persistent" if check_bool("persist", self.persist) else "view"
        check_context_window(self.context_window)
        self._recall = recall_option(self.recall)
        if self._recall is not None:
            # Persistent mode replaces an image in the run's history, and a conversation store saves
            # the run only when it ends: an image removed during the run is nowhere to be found.
            self._recall.install(self.pipeline.processors, media=self.mode == "view")
        if self.id is not None and (not isinstance(self.id, str) or not self.id):
            raise InvalidArgumentError(f"id must be a non-empty str or None, got {self.id!r}")

    def get_toolset(self) -> Any:
        """The recall tool, when `recall` is on (Pydantic AI adds a capability's toolset to the agent)."""
        return None if self._recall is None else _recall_toolset(self._recall, self)

    # -- durable execution (`historykit.plugins.pydantic_ai._durable`) -----------------------------

    @_durable_operation("view")
    async def _view_operation(self, ctx: RunContext[Any], request: ViewRequest) -> ViewResult:
        """One model request's pipeline call: the engine's durable unit under a durability capability."""
        return await self._run_view(request)

    @_durable_operation("recompact")
    async def _recompact_operation(
        self, ctx: RunContext[Any], request: RecompactRequest
    ) -> ViewResult | None:
        """A compact-and-retry after a context overflow, as a durable unit."""
        return await self._run_recompact(request)

    @_durable_operation("recall")
    async def _recall_operation(
        self,
        ctx: RunContext[Any],
        handle: str,
        offset: int,
        start_line: int | None,
        end_line: int | None,
        grep: str | None,
        conversation: str | None,
    ) -> str:
        """A recall look-up that reads the store (`Recall.store`), as a durable unit."""
        return await self._run_recall(handle, offset, start_line, end_line, grep, conversation)

    @_durable_operation("search")
    async def _search_operation(self, ctx: RunContext[Any], query: str, conversation: str) -> list[Any]:
        """The search tool's read of the store (`Recall.store`), as a durable unit: the hits, as JSON."""
        return await self._run_search(query, conversation)

    async def _run_search(self, query: str, conversation: str) -> list[Any]:
        assert self._recall is not None  # the search tool exists only with it
        return [hit.to_json() for hit in await self._recall.stored_hits(query, conversation)]

    async def _run_view(self, request: ViewRequest) -> ViewResult:
        call = replace(request.call(), hooks=self.compaction_hooks)
        given = request.messages
        neutral = _ADAPTER.to_neutral(given)
        previous = request.previous
        if previous is not None:
            # Continue from the view the run's previous call was sent, whatever this worker saw.
            raw = neutral[: previous.raw_length]
            self.pipeline.remember_neutral_view(raw, _ADAPTER.to_neutral(previous.messages), call)
        result = native_result(_ADAPTER, given, neutral, await self.pipeline.arun_call(neutral, call))
        self._deliver(result)
        return ViewResult.encode(given, result.messages, dict(result.originals), kept=result.kept)

    async def _run_recompact(self, request: RecompactRequest) -> ViewResult | None:
        call = replace(request.request.call(), hooks=self.compaction_hooks)
        given = request.request.messages
        neutral = _ADAPTER.to_neutral(given)
        error = _overflow_error(request.overflow)
        retried = await arecompact(self.pipeline, neutral, error, call, _ADAPTER.to_neutral(request.rejected))
        if retried is None:
            return None
        result = native_result(_ADAPTER, given, neutral, retried)
        self._deliver(result)
        window = self.pipeline.state_of(call).window
        return ViewResult.encode(given, result.messages, dict(result.originals), window, result.kept)

    async def _run_recall(
        self,
        handle: str,
        offset: int,
        start_line: int | None,
        end_line: int | None,
        grep: str | None,
        conversation: str | None,
    ) -> str:
        assert self._recall is not None  # the recall tool exists only with it
        state = self.state_of(conversation) if conversation is not None else None
        return await self._recall.alookup(
            handle, offset, start_line, end_line, grep, state=state, store_key=conversation
        )

    async def _durably(self, engine: Engine, ctx: RunContext[Any], operation: str, *args: Any) -> Any:
        """Run `operation` as the engine's durable unit (`durable_engine` chose how)."""
        if engine == "capability":
            method: Any = {
                "view": self._view_operation,
                "recompact": self._recompact_operation,
                "recall": self._recall_operation,
                "search": self._search_operation,
            }[operation]
            return await method(ctx, *args)
        from dbos import DBOS

        body = {
            "view": self._run_view,
            "recompact": self._run_recompact,
            "recall": self._run_recall,
            "search": self._run_search,
        }[operation]
        step: Any = DBOS.run_step_async
        return await step({"name": f"historykit.{self.id}.{operation}"}, body, *args)

    async def _request_view(
        self, ctx: RunContext[Any], given: list[ModelMessage], model: Any
    ) -> tuple[_View, _Step]:
        """The view this request sends (and the history kept), made in place or, inside a durable
        workflow or flow, as the engine's durable unit; and what a retry after an overflow starts
        again from."""
        conversation = _conversation(ctx)
        call = self.call_for(model, conversation, self._take_manual(conversation))
        engine = durable_engine(ctx, self.id, "view")
        if engine is None:
            neutral = _ADAPTER.to_neutral(given)
            result = native_result(_ADAPTER, given, neutral, await self.pipeline.arun_call(neutral, call))
            self._deliver(result)
            self._keep_originals_of(conversation, result)
            return _View.of(result), _Step(given, neutral, call)
        refuse_background(self.pipeline.processors)
        run = getattr(ctx, "run_id", None)
        request = ViewRequest.of(given, call, conversation, self._last_views.get(run))
        recorded: ViewResult = await self._durably(engine, ctx, "view", request)
        view = self._apply_recorded(conversation, given, recorded)
        if call.mode == "view":
            self._last_views.keep(run, len(given), view.kept)
        return view, _Step(given, None, call, request=request)

    def _apply_recorded(
        self, conversation: str | None, given: list[ModelMessage], recorded: ViewResult
    ) -> _View:
        """The view a durable unit gave back (run now, or its recorded result on a replay), with
        what the workflow keeps of it: recall's originals, a shrunk window, what the view replaced."""
        processed = recorded.decode(given)
        kept = recorded.decode_kept(given)
        provenance.record(given, processed)
        if kept is not None:
            provenance.record(given, kept)
        if conversation is not None:
            state = self.state_of(conversation)
            if self._recall is not None and recorded.originals:
                self._recall.keep(state, recorded.originals)
            if recorded.window is not None:
                state.window = recorded.window
        return _View(processed, processed if kept is None else kept)

    def _keep_originals(self, ctx: RunContext[Any], result: PipelineResult[Any]) -> None:
        self._keep_originals_of(_conversation(ctx), result)

    def _keep_originals_of(self, conversation: str | None, result: PipelineResult[Any]) -> None:
        # Persistent mode replaces the history: what the placeholders replaced is kept for recall,
        # with the conversation it belongs to (a run with none keeps nothing: no later call asks).
        if self._recall is not None and result.originals and conversation is not None:
            self._recall.keep(self.state_of(conversation), result.originals)

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds a processor object: not expressible in an agent spec

    async def compact_conversation(
        self,
        conversation: Any,
        focus: str | None = None,
        *,
        keep_last: int | None = None,
        model: Any = None,
    ) -> Any:
        """A Pydantic AI `Conversation` (a stored one: `store.load(...)`) compacted now, with a focus.

        Returns a new `Conversation` with the same id, usage and revision and the compacted
        messages, to save (`store.save(...)`; the store keeps the history it replaces as a branch)
        and continue from. The window is this kit's `context_window`, else `model`'s, else the
        default. Persistent mode only: a view-only conversation keeps every message as it arrived,
        so compact at its next request instead (`compact(focus, conversation=...)`).

        Example:
            ```python
            conversation = await store.load(conversation_id)
            compacted = await kit.compact_conversation(conversation, "keep the auth refactor")
            await store.save(compacted)
            ```
        """
        if not self.persist:
            raise InvalidArgumentError(
                "compact_conversation rewrites the stored history, which view-only mode (persist=False) "
                "keeps as it arrived: call kit.compact(focus, conversation=...) to compact at the next one"
            )
        from pydantic_ai.conversation import Conversation

        given = list(conversation.messages)
        call = self.call_for(model, conversation.conversation_id, ManualCompaction(focus, keep_last))
        neutral = _ADAPTER.to_neutral(given)
        result = native_result(_ADAPTER, given, neutral, await self.pipeline.arun_call(neutral, call))
        self._deliver(result)
        self._keep_originals_of(conversation.conversation_id, result)
        return Conversation(
            conversation_id=conversation.conversation_id,
            messages=list(result.history),
            usage=conversation.usage,
            deferred_tool_requests=conversation.deferred_tool_requests,
            revision=conversation.revision,
        )

    async def before_model_request(self, ctx: RunContext[Any], request_context: Any) -> Any:
        if not self.persist and not _BEFORE_HOOK_IS_REQUEST_ONLY:
            return request_context  # 1.x writes these messages back: view-only works in wrap_model_request
        given = list(request_context.messages)
        view, step = await self._request_view(ctx, given, request_context.model)
        # What a retry after a context overflow starts again from.
        self._steps[_step(ctx)] = step
        if _BEFORE_HOOK_IS_REQUEST_ONLY:
            # 2.x: these messages are the request's alone, so the provider's block and the repairs
            # go in; the run's history is ctx.messages, which keeps the compaction edits only.
            request_context.messages = with_provider_compaction(view.sent)
            if self.persist:
                ctx.messages[:] = view.kept
        else:
            # 1.x writes these messages into the run's history: the history kept goes here, and
            # `wrap_model_request` sends the repaired view (with the provider's block).
            request_context.messages = list(view.kept)
            step.sent = view.sent
        return request_context

    async def wrap_model_request(self, ctx: RunContext[Any], *, request_context: Any, handler: Any) -> Any:
        if _RETRY_BY_ATTEMPT:
            return await handler(request_context)  # 2.x: `on_model_request_error` retries
        model = request_context.model
        if self.persist:
            step = self._steps.pop(_step(ctx), None)  # `before_model_request` processed the history
            view = (
                request_context.messages if step is None or step.sent is None else _as_sent_in_1x(step.sent)
            )
            sent = replace(request_context, messages=with_provider_compaction(view))
        else:
            # 1.x view-only: what the handler gets here is sent to the model and never written back.
            given = list(request_context.messages)
            result, neutral, call = await self.process(given, model, _conversation(ctx))
            # What a step wrote (a summary's recall index) exists nowhere else, in this mode too.
            self._keep_originals(ctx, result)
            step = _Step(given, neutral, call)
            sent = replace(
                request_context, messages=with_provider_compaction(_as_sent_in_1x(result.messages))
            )
        try:
            return await handler(sent)
        except Exception as error:
            if step is None:
                raise
            retried = await self._recompact(ctx, step, error, sent.messages)
            if retried is None:
                raise
            if self.persist:
                ctx.messages[:] = retried.kept  # 1.x: the run's history itself
            again = with_provider_compaction(_as_sent_in_1x(retried.sent))
            return await handler(replace(request_context, messages=again))  # once only

    async def _recompact(
        self, ctx: RunContext[Any], step: _Step, error: Exception, rejected: list[ModelMessage]
    ) -> _View | None:
        """The step's view again for a smaller window (`historykit.plugins._overflow`), delivered and
        its originals kept; `None` when `error` is no context overflow."""
        if step.request is not None:  # the step's view was a durable unit: so is its retry
            overflow = context_overflow(error)
            engine = durable_engine(ctx, self.id, "recompact")
            if overflow is None or engine is None:
                return None
            request = RecompactRequest(step.request, list(rejected), overflow.message)
            recorded: ViewResult | None = await self._durably(engine, ctx, "recompact", request)
            if recorded is None:
                return None
            return self._apply_recorded(_conversation(ctx), step.native, recorded)
        assert step.given is not None  # converted when the step's view was made in place
        retried = await arecompact(self.pipeline, step.given, error, step.call, _ADAPTER.to_neutral(rejected))
        if retried is None:
            return None
        result = native_result(_ADAPTER, step.native, step.given, retried)
        self._deliver(result)
        self._keep_originals(ctx, result)
        return _View.of(result)

    async def on_model_request_error(
        self, ctx: RunContext[Any], *, request_context: Any, error: Exception
    ) -> Any:
        """Compact and retry (2.x; 1.x retries in `wrap_model_request`): a context-length error makes
        the pipeline run again on the same input with a smaller window (`historykit.plugins._overflow`),
        once per request step; the next attempt sends that view. Any other error, or a second
        overflow, is raised unchanged."""
        step = self._steps.get(_step(ctx)) if _RETRY_BY_ATTEMPT else None
        if step is None or step.retried is not None:
            self._steps.pop(_step(ctx), None)  # retried already: this failure ends the step
            raise error
        step.retried = await self._recompact(ctx, step, error, request_context.messages)
        if step.retried is None:
            raise error
        if self.persist:
            ctx.messages[:] = step.retried.kept
        assert _RetryModelRequest is not None  # checked by _RETRY_BY_ATTEMPT
        raise _RetryModelRequest()

    async def prepare_model_request(self, ctx: RunContext[Any], request_context: Any) -> Any:
        step = self._steps.get(_step(ctx))
        if step is not None and step.retried is not None:
            request_context.messages = with_provider_compaction(step.retried.sent)
        return request_context

    async def after_model_request(self, ctx: RunContext[Any], *, request_context: Any, response: Any) -> Any:
        self._steps.pop(_step(ctx), None)  # the step is answered: nothing left to retry
        return response


@dataclass(frozen=True)
class _View:
    """One request's view: what the model is sent, and what the run's history keeps (persistent
    mode): the compaction edits without the provider-rule repairs (`PipelineResult.history`)."""

    sent: list[ModelMessage]
    kept: list[ModelMessage]

    @classmethod
    def of(cls, result: PipelineResult[ModelMessage]) -> _View:
        return cls(list(result.messages), list(result.history))


@dataclass
class _Step:
    """A request step's input and call, kept until it is answered, for a retry after an overflow."""

    native: list[ModelMessage]
    given: list[Message] | None
    """`native`, converted once; `None` when the view was a durable unit (converted there)."""
    call: Call
    retried: _View | None = None
    """The view the retry sends (and the history it keeps), once the step has been retried."""
    sent: list[ModelMessage] | None = None
    """1.x persistent mode: the repaired view `wrap_model_request` sends, when `before_model_request`
    gave the run's history the one kept."""
    request: ViewRequest | None = None
    """The durable unit's request, when the step's view was one (`_durable`)."""


def _recall_toolset(recall: Recall, kit: HistoryKit) -> Any:
    """A toolset with the recall tool: the original output a placeholder's handle names, searched
    in the run's own conversation only.

    Under a durable engine the tool runs in the workflow or flow (its metadata says so to Temporal
    and Prefect, which would run it in an activity or task): the run's history and the originals the
    recorded views kept are there, and looking in them is deterministic. Only a look-up that reads
    the store (`Recall.store`) is a durable unit (the capability's `recall` operation). Run in an
    activity anyway (the engine's per-tool configuration), it finds no history there and looks in
    the originals this process kept and the store."""
    from pydantic_ai.tools import Tool
    from pydantic_ai.toolsets import FunctionToolset

    async def recall_output(
        ctx: RunContext[Any],
        handle: str,
        offset: int = 0,
        start_line: int | None = None,
        end_line: int | None = None,
        grep: str | None = None,
    ) -> Any:
        """Return a cleared or shortened tool output, or part of it; or a removed image.

        Args:
            handle: The handle the placeholder names.
            offset: Where to start in the output (a character), for the next part of a long one.
            start_line: The first line to return (numbered from 1).
            end_line: The last line to return.
            grep: Return only the lines that contain this text (case-insensitive, not a regular expression).
        """
        reading = (offset, start_line, end_line, grep)
        conversation = _conversation(ctx)
        state = kit.state_of(conversation) if conversation is not None else None
        history = _ADAPTER.to_neutral(_run_history(ctx))
        reads_store = (
            recall.store is not None
            and conversation is not None
            and isinstance(handle, str)
            and not Recall._known(handle, state, None, history)
        )
        engine = durable_engine(ctx, kit.id, "recall") if reads_store else None
        # An image `ClearMedia` removed: the item itself, from the run's history or the store (not
        # inside a durable engine's workflow, whose recorded answers are text).
        store_key = conversation if reads_store and engine is None else None
        media = await recall.amedia(handle, history=history, store_key=store_key)
        if media is not None:
            return media.native.item if isinstance(media.native, PromptItem) else media.native
        if engine is not None:
            answer: str = await kit._durably(engine, ctx, "recall", handle, *reading, conversation)
            return answer
        return await recall.alookup(
            handle, offset, start_line, end_line, grep, state=state, history=history, store_key=conversation
        )

    async def search_history(ctx: RunContext[Any], query: str, page: int = 1) -> str:
        """Search everything this conversation contained.

        Args:
            query: One or more words; a line matches when it contains all of them.
            page: The page of hits to show (newest first).
        """
        conversation = _conversation(ctx)
        state = kit.state_of(conversation) if conversation is not None else None
        history = _ADAPTER.to_neutral(_run_history(ctx))
        reads_store = recall.store is not None and conversation is not None and isinstance(query, str)
        engine = durable_engine(ctx, kit.id, "search") if reads_store else None
        if engine is not None and query.split():
            found: list[Any] = await kit._durably(engine, ctx, "search", query, conversation)
            stored = [Hit.from_json(hit) for hit in found]
            return recall.find_with(query, page, stored, state=state, history=history)
        return await recall.afind(query, page, state=state, history=history, store_key=conversation)

    functions: list[tuple[Callable[..., Any], str, str]] = [(recall_output, recall.name, recall.description)]
    if recall.search:
        functions.append((search_history, recall.search_name, recall.search_description))
    # Looked up in the workflow or flow (see above); only a read of the store is a durable unit.
    in_workflow = {engine: False for engine in _WORKFLOW_SIDE_ENGINES}
    tools = [
        Tool(function, takes_ctx=True, name=name, description=description, metadata=in_workflow)
        for function, name, description in functions
    ]
    toolset_id = f"{kit.id}_recall" if kit.id is not None else None
    return FunctionToolset(tools, id=toolset_id)


_WORKFLOW_SIDE_ENGINES = ("temporal", "prefect")
"""The durable engines whose tool metadata key (`False`: no activity or task) keeps the recall tool
in the workflow or flow; DBOS runs function tools there already."""


def _run_history(ctx: RunContext[Any]) -> list[ModelMessage]:
    """The run's history; none inside a durable unit whose run context does not carry it (a
    Temporal activity raises on `ctx.messages`: the history would ride in every payload)."""
    from pydantic_ai.exceptions import UserError as _PydanticAIUserError

    try:
        return list(ctx.messages)
    except _PydanticAIUserError:
        return []


def _overflow_error(message: str) -> Exception:
    """The context-length error a durable unit's compact-and-retry re-reads (`context_overflow`):
    the provider's message as Pydantic AI's own error class for it, which carries it whole."""
    from pydantic_ai.exceptions import ModelContextWindowExceededError

    return ModelContextWindowExceededError("historykit", message)


def with_provider_compaction(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    """What the model is sent: after each summary a native backend wrote, the provider's own block.

    The block goes as that provider's `CompactionPart` in a `ModelResponse` right after the summary
    request (`historykit.plugins.native_compaction`). Pydantic AI sends it to its own provider only,
    and there drops the history before it (the summary text and the task included; the block stands
    for them); any other model drops the block and reads the summary text. The run's history is not
    given it: only the request is.
    """
    compaction_part = getattr(_pai_messages, "CompactionPart", None)
    if compaction_part is None:  # pragma: no cover - a Pydantic AI without compaction parts
        return list(messages)
    out: list[ModelMessage] = []
    for message in messages:
        out.append(message)
        if not isinstance(message, _pai_messages.ModelRequest):
            continue
        for part in message.parts:
            compaction = _provider_compaction_in(part)
            if compaction is not None:
                out.append(_provider_response(compaction, compaction_part))
    return out


def _provider_compaction_in(part: Any) -> ProviderCompaction | None:
    """The provider compaction a summary part (a request `CompactionPart`, or 1.x's `TextContent`
    in a user prompt) carries in its metadata."""
    candidates = [part]
    if isinstance(part, _pai_messages.UserPromptPart) and not isinstance(part.content, str):
        candidates = list(part.content)
    for candidate in candidates:
        metadata = getattr(candidate, "metadata", None)
        if isinstance(metadata, dict) and PROVIDER_COMPACTION_KEY in metadata:
            return ProviderCompaction.from_dict(metadata[PROVIDER_COMPACTION_KEY])
    return None


def _provider_response(compaction: ProviderCompaction, compaction_part: Any) -> ModelMessage:
    block = compaction.block_dict()
    if compaction.provider == "openai":
        # As Pydantic AI keeps an item from `/responses/compact`: the encrypted item in the details.
        part = compaction_part(
            content=None, id=block.get("id"), provider_name="openai", provider_details=block
        )
    else:
        details = {k: block[k] for k in ("signature", "encrypted_content") if block.get(k) is not None}
        part = compaction_part(
            content=block.get("content"), provider_name=compaction.provider, provider_details=details or None
        )
    return _pai_messages.ModelResponse(
        parts=[part], model_name=compaction.model, provider_name=compaction.provider
    )


def _as_sent_in_1x(messages: list[ModelMessage]) -> list[ModelMessage]:
    """1.x merges consecutive requests of the history `before_model_request` returned before sending
    it (`_clean_message_history`); what `wrap_model_request` sends (the view-only view, a retry) is
    merged the same way, so both modes send the same requests and a call after a persistent retry,
    which sends the stored history merged, extends it."""
    try:
        from pydantic_ai._agent_graph import _clean_message_history
    except ImportError:  # pragma: no cover - a 1.x without it sends the history as it is
        return messages
    return list(_clean_message_history(list(messages)))


def _conversation(ctx: RunContext[Any]) -> str | None:
    """The run's conversation: its `conversation_id` (given, inherited from the message history, or
    new for a new conversation); a run that has none is a conversation of its own (its `run_id`)."""
    conversation = getattr(ctx, "conversation_id", None) or getattr(ctx, "run_id", None)
    return conversation if isinstance(conversation, str) and conversation else None


def _step(ctx: RunContext[Any]) -> tuple[str | None, int]:
    return (getattr(ctx, "run_id", None), ctx.run_step)


class HistoryKitProcessor(_Glue):
    """A Pydantic AI history processor (`Agent(history_processors=[...])`, 1.x) with the model's window.

    Pydantic AI passes it the run context, so it budgets with the run's model's context window when
    you give none, and awaits the pipeline on the agent's loop. The processed history becomes the
    run's history (Pydantic AI's rule for history processors). In 2.x, pass it to
    `ProcessHistory(...)`, or use `HistoryKit`.

    The run keeps the request's provider-rule repairs too: a history processor returns one list,
    which Pydantic AI both sends to the model and writes back as the run's history, so the `Repair`
    edits meant for the request alone (`PipelineResult.messages`, not `PipelineResult.history`)
    stay in `result.all_messages()` (a reused tool-call id stays renamed, for example). Where the
    1.x version has capabilities, `capabilities=[HistoryKit(...)]` keeps them apart: it sends the
    repaired request from `wrap_model_request` and keeps the compaction edits only.

    It cannot compact and retry when the provider answers that the request is too long: a history
    processor runs before the model call and never sees its error, so the error reaches the caller.
    `HistoryKit` does retry (`historykit.plugins._overflow`).

    Example:
        ```python
        from pydantic_ai import Agent
        from historykit.plugins.pydantic_ai import HistoryKitProcessor

        agent = Agent("openai:gpt-4o", history_processors=[HistoryKitProcessor(pipeline, on_report=print)])
        ```
    """

    wrap_tool_call = WrongFramework(
        "HistoryKitProcessor is a Pydantic AI history processor (history_processors=[...]); for "
        "LangChain use historykit.plugins.langchain.HistoryKitMiddleware (create_agent(..., "
        "middleware=[...])) or HistoryKitHook (create_react_agent(..., pre_model_hook=...))"
    )
    """Read by LangChain's `create_agent` off each middleware's class: a clear error for the mix-up."""

    def __init__(
        self,
        processor: HistoryProcessor,
        *,
        context_window: int | None = None,
        on_report: Callable[[Report], None] | None = None,
        binds_thinking: bool | None = None,
        before_compaction: BeforeHook | None = None,
        after_compaction: AfterHook | None = None,
    ) -> None:
        self.pipeline = pipeline_of(processor)
        """The pipeline that runs (a single processor is wrapped in one)."""
        self.compaction_hooks = self._hooks(before_compaction, after_compaction)
        """Called around each compaction, with the run's conversation (`HistoryKit.before_compaction`)."""
        self.context_window = check_context_window(context_window)
        """The window to budget for; `None`: the run's model's, else historykit's default."""
        self.on_report = on_report
        """Called with every call's report."""
        self.last_report = None
        """The report of the latest call."""
        self.binds_thinking = binds_thinking
        """Whether the model binds thinking to the history (R13); `None`: from the run's model."""
        self._manual = {}

    def __repr__(self) -> str:
        return f"HistoryKitProcessor({self.pipeline!r}, context_window={self.context_window!r})"

    async def __call__(self, ctx: RunContext[Any], messages: list[ModelMessage]) -> list[ModelMessage]:
        result, _, _ = await self.process(messages, ctx.model, _conversation(ctx))
        return list(result.messages)
