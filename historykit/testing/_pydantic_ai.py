"""A recorded session replayed to a Pydantic AI `Agent`: a `FunctionModel` and recorded tools."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from historykit._messages import Message
from historykit.errors import ReplayMismatchError
from historykit.testing._replay import CLOSING_TEXT, _Replay

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

    model: FunctionModel
    """The model: pass it to `Agent(...)`."""
    tools: list[Tool[Any]]
    """One tool per tool name the session used, each returning the recorded results."""
    system_prompts: list[str]
    """For `Agent(system_prompt=...)`."""
    prompts: list[str]
    """The user prompt of each turn."""

    def _responses(self, turn: list[Message]) -> list[ModelResponse]:
        from pydantic_ai.messages import ModelResponse

        from historykit.plugins.pydantic_ai import PydanticAIAdapter

        return [m for m in PydanticAIAdapter().to_native(turn) if isinstance(m, ModelResponse)]

    def _build(self, window: int | None) -> None:
        from pydantic_ai.models.function import FunctionModel

        recording = self.recording
        profile: Any = {"context_window": window} if window is not None and _profiles_have_window() else None
        self.model = FunctionModel(self._answer, model_name=f"replay:{recording.name}", profile=profile)
        results = recording.tool_results()
        self.tools = [_recorded_tool(name, results) for name in recording.tool_names]
        self.system_prompts = recording.system_prompts
        self.prompts = ["\n\n".join(recording.prompts(t)) for t in range(len(recording.turns))]

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
