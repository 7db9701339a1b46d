"""A recorded session replayed to a Pydantic AI `Agent`: a `FunctionModel` and recorded tools."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from historykit.errors import ReplayMismatchError
from historykit.testing._recording import Recording
from historykit.testing._replay import CLOSING_TEXT, DEFAULT_WINDOW, Call, _Replay
from historykit.tokens import TokenCounter

if TYPE_CHECKING:
    from pydantic_ai import Tool
    from pydantic_ai.messages import ModelMessage, ModelResponse
    from pydantic_ai.models.function import AgentInfo, FunctionModel


class PydanticAIReplay(_Replay["ModelResponse"]):
    """A recording as Pydantic AI pieces: a `FunctionModel` that answers as the session did, and its tools.

    The model answers each call with the turn's next recorded `ModelResponse` (reporting as its input
    tokens what historykit counts in the messages it was sent, as a provider would), and closes a turn
    whose recording has no final answer with `CLOSING_TEXT`. Each tool returns the result the session
    recorded for the call id it is given, and raises `ReplayMismatchError` for a call id the session
    does not have. Call `start_turn(n)` before running turn `n` (the first is started already).
    Pydantic AI is imported when a replay is made, not with `historykit.testing`.

    Example:
        ```python
        from pydantic_ai import Agent
        from pydantic_ai.usage import UsageLimits

        from historykit.testing import PydanticAIReplay, Recording

        replay = PydanticAIReplay(Recording.load(), window=10_000)
        agent = Agent(replay.model, tools=replay.tools, system_prompt=replay.system_prompts)
        result = await agent.run(replay.prompts[0], usage_limits=UsageLimits(request_limit=None))
        replay.calls[-1].sent    # tokens the last call sent
        ```
    """

    def __init__(
        self,
        recording: Recording,
        *,
        window: int | None = DEFAULT_WINDOW,
        counter: TokenCounter | None = None,
        on_call: Callable[[Call], None] | None = None,
        delay: float = 0.0,
    ) -> None:
        """Args:
        recording: The session to replay.
        window: The context window the model declares in its profile (`None`: none). Pydantic AI
            1.x profiles have no window: there, give it to `HistoryKitProcessor(context_window=...)`.
        counter: Counts the tokens of each call (a default `TokenCounter` otherwise).
        on_call: Called with each `Call` as the model receives it.
        delay: Seconds each model call waits, so a live display can be followed.
        """
        from pydantic_ai.messages import ModelResponse
        from pydantic_ai.models.function import FunctionModel

        from historykit.plugins.pydantic_ai import PydanticAIAdapter

        turns: list[list[ModelResponse]] = []
        for start, end in recording.turns:
            native = PydanticAIAdapter().to_native(recording.messages[start:end])
            turns.append([m for m in native if isinstance(m, ModelResponse)])
        super().__init__(recording, turns, counter=counter, on_call=on_call, delay=delay)
        profile: Any = {"context_window": window} if window is not None and _profiles_have_window() else None
        self.model: FunctionModel = FunctionModel(
            self._answer, model_name=f"replay:{recording.name}", profile=profile
        )
        """The model: pass it to `Agent(...)`."""
        results = recording.tool_results()
        self.tools: list[Tool[Any]] = [_recorded_tool(name, results) for name in recording.tool_names]
        """One tool per tool name the session used, each returning the recorded results."""
        self.system_prompts: list[str] = recording.system_prompts
        """For `Agent(system_prompt=...)`."""
        self.prompts: list[str] = ["\n\n".join(recording.prompts(t)) for t in range(len(recording.turns))]
        """The user prompt of each turn."""

    async def _answer(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        from pydantic_ai.messages import ModelResponse
        from pydantic_ai.messages import TextPart as PaiTextPart
        from pydantic_ai.usage import RequestUsage

        call, response = self._respond(messages)
        if self.delay:
            await asyncio.sleep(self.delay)
        if response is None:
            return ModelResponse(
                parts=[PaiTextPart(CLOSING_TEXT)], usage=RequestUsage(input_tokens=call.sent)
            )
        # A copy: the agent stamps its own fields (run id, timestamps) on what the model returns.
        return replace(response, usage=RequestUsage(input_tokens=call.sent, output_tokens=0))


def _profiles_have_window() -> bool:
    """Whether model profiles state a context window (Pydantic AI 2.x; 1.x profiles have none)."""
    import dataclasses

    from pydantic_ai.profiles import ModelProfile

    return not dataclasses.is_dataclass(ModelProfile)


def _recorded_tool(name: str, results: dict[str, str]) -> Tool[Any]:
    """A tool taking any arguments and returning what `name` returned, in the session, for the call id."""
    from pydantic_ai import RunContext, Tool

    async def recorded(ctx: RunContext[Any], **arguments: Any) -> str:
        if ctx.tool_call_id not in results:
            raise ReplayMismatchError(f"the recording has no result for {name} call {ctx.tool_call_id!r}")
        return results[ctx.tool_call_id]

    return Tool.from_schema(
        recorded,
        name=name,
        description=f"Returns what `{name}` returned in the recorded session.",
        json_schema={"type": "object", "additionalProperties": True},
        takes_ctx=True,
    )
