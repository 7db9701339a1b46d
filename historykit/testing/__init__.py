"""Test doubles for agents that use historykit: replay a recorded session instead of calling an LLM.

A `Recording` is a transcript (any format `historykit.formats` reads, the bundled sample by default,
or neutral messages you built) cut into turns. A replay turns it into what a framework's agent takes:

- `PydanticAIReplay(recording).model`: a Pydantic AI `FunctionModel` for `Agent(...)`;
- `LangChainReplay(recording).model`: a LangChain `BaseChatModel` for `create_agent(...)` or a
  LangGraph graph;

each answering every model call with the turn's next recorded assistant message, with `tools` that
return the results the session recorded. `replay.calls` tells what each call was sent (tokens,
prompt-cache reuse), so a test can assert on what historykit kept in the context.
`CountingSummarizer` summarizes with no LLM and records every call.

Answers come in the recorded order. A turn whose recording has run out of answers is closed with
`CLOSING_TEXT` (the model answers it as text, so the agent run ends); a recorded tool called with
a call id the session does not have raises `historykit.errors.ReplayMismatchError`; `start_turn`
with a turn the recording does not have raises `InvalidArgumentError`.

Importing this module imports neither Pydantic AI nor LangChain: a replay imports its framework
when it is made.

Example:
    ```python
    from pydantic_ai import Agent
    from pydantic_ai.usage import UsageLimits

    import historykit
    from historykit.plugins.pydantic_ai import HistoryKit
    from historykit.testing import PydanticAIReplay, Recording

    replay = PydanticAIReplay(Recording.load("session.jsonl"), window=10_000)
    agent = Agent(replay.model, tools=replay.tools, capabilities=[HistoryKit(historykit.default_pipeline())])
    result = await agent.run(replay.prompts[0], usage_limits=UsageLimits(request_limit=None))
    assert max(call.sent for call in replay.calls) <= 10_000
    ```
"""

from __future__ import annotations

from historykit.testing._langchain import LangChainReplay
from historykit.testing._pydantic_ai import PydanticAIReplay
from historykit.testing._recording import Recording, sample_path
from historykit.testing._replay import CLOSING_TEXT, Call
from historykit.testing._summarizer import CountingSummarizer

__all__ = [
    "CLOSING_TEXT",
    "Call",
    "CountingSummarizer",
    "LangChainReplay",
    "PydanticAIReplay",
    "Recording",
    "sample_path",
]
