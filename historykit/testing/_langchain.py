"""A recorded session replayed to a LangChain agent: a chat model and recorded tools."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from historykit._messages import Message
from historykit.errors import ReplayMismatchError
from historykit.testing._replay import CLOSING_TEXT, _Replay

if TYPE_CHECKING:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
    from langchain_core.tools import BaseTool


class LangChainReplay(_Replay["AIMessage"]):
    """A recording as LangChain pieces: a chat model that answers as the session did, and its tools.

    The chat model (`model`, a `BaseChatModel` with `profile={"max_input_tokens": window}`) answers
    each call with the turn's next recorded `AIMessage` (with `usage_metadata` counted on what it was
    sent), and closes a turn whose recording has no final answer with `CLOSING_TEXT`. Each tool
    returns the recorded result of the call id it is given, and raises `ReplayMismatchError` for a
    call id the session does not have. Call `start_turn(n)` before running turn `n`. LangChain is
    imported when a replay is made, not with `historykit.testing`.

    Example:
        ```python
        from langchain.agents import create_agent

        from historykit.testing import LangChainReplay, Recording

        replay = LangChainReplay(Recording.load(), window=10_000)
        agent = create_agent(replay.model, replay.tools, system_prompt=replay.system_prompt)
        agent.invoke({"messages": replay.prompts[0]}, {"recursion_limit": 10_000})
        ```
    """

    model: BaseChatModel
    """The chat model: pass it to `create_agent(...)` (it binds any tools)."""
    tools: list[BaseTool]
    """One tool per tool name the session used, each returning the recorded results."""
    system_prompt: str | None
    """For `create_agent(system_prompt=...)`."""
    prompts: list[list[HumanMessage]]
    """The user messages that open each turn."""

    def _responses(self, turn: list[Message]) -> list[AIMessage]:
        from langchain_core.messages import AIMessage

        from historykit.plugins.langchain import LangChainAdapter

        return [m for m in LangChainAdapter().to_native(turn) if isinstance(m, AIMessage)]

    def _build(self, window: int | None) -> None:
        from langchain_core.messages import HumanMessage

        recording = self.recording
        profile = {"max_input_tokens": window} if window is not None else None
        self.model = _replay_chat_model_class()(replay=self, profile=profile)
        results = recording.tool_results()
        tool_class = _recorded_tool_class()
        self.tools = [
            tool_class(
                name=name,
                description=f"Returns what `{name}` returned in the recorded session.",
                results=results,
            )
            for name in recording.tool_names
        ]
        system = recording.system_prompts
        self.system_prompt = "\n\n".join(system) if system else None
        self.prompts = [
            [HumanMessage(text) for text in recording.prompts(t)] for t in range(len(recording.turns))
        ]

    def _answer(self, messages: Sequence[BaseMessage]) -> AIMessage:
        from langchain_core.messages import AIMessage

        call, response = self._respond(messages)
        if self.delay:
            time.sleep(self.delay)
        usage: Any = {"input_tokens": call.sent, "output_tokens": 0, "total_tokens": call.sent}
        if response is None:
            return AIMessage(CLOSING_TEXT, usage_metadata=usage)
        return response.model_copy(update={"usage_metadata": usage})


@lru_cache(maxsize=1)
def _replay_chat_model_class() -> Callable[..., BaseChatModel]:
    """The replaying chat model class, built on first use so LangChain is imported only when needed."""
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.outputs import ChatGeneration, ChatResult

    class ReplayChatModel(BaseChatModel):
        """Answers every call with the next message of a recorded session (see `LangChainReplay`)."""

        replay: Any
        """The `LangChainReplay` it answers for."""

        @property
        def _llm_type(self) -> str:
            return "historykit-replay"

        def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
            # The answers are recorded already: the tools change nothing.
            return self

        def _generate(
            self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kwargs: Any
        ) -> ChatResult:
            return ChatResult(generations=[ChatGeneration(message=self.replay._answer(messages))])

    return ReplayChatModel


@lru_cache(maxsize=1)
def _recorded_tool_class() -> Callable[..., BaseTool]:
    """A LangChain tool returning the recorded result of the call id it is given."""
    from typing import Annotated

    from langchain_core.tools import BaseTool, InjectedToolCallId
    from pydantic import BaseModel, ConfigDict

    class RecordedArguments(BaseModel):
        # Any arguments the recording has; the call id comes from LangChain, not from the model.
        model_config = ConfigDict(extra="allow")
        tool_call_id: Annotated[str, InjectedToolCallId]

    class RecordedTool(BaseTool):
        """Returns what the tool returned in the recorded session."""

        args_schema: Any = RecordedArguments
        results: dict[str, str]

        def _run(self, tool_call_id: str, **arguments: Any) -> str:
            if tool_call_id not in self.results:
                raise ReplayMismatchError(
                    f"the recording has no result for {self.name} call {tool_call_id!r}"
                )
            return self.results[tool_call_id]

    return RecordedTool
