"""Summarizing with a LangChain chat model: `LangChainSummarizer` (what `Summarize(model=...)` makes)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from historykit._messages import Message
from historykit.processors._summarizers import SUMMARY_INSTRUCTIONS, UnusableSummarizerError, summary_prompt

# Provider answers that say the summarizer cannot work as configured (a bad key, no access, no such
# model): the same on every attempt, so they are raised at once instead of retried or truncated.
UNUSABLE_STATUS = frozenset({401, 403, 404})

SUMMARY_SOURCE_TAG = "historykit_summarization"
"""`metadata["lc_source"]` of the summarizer's model calls (LangChain's own summary says `summarization`)."""


def summary_call_config() -> dict[str, Any]:
    """The `RunnableConfig` of the summarizer's model call: tagged `nostream` so that LangGraph's
    `stream_mode="messages"` never shows it as a message of the graph, and marked internal the way
    LangChain 1.5's own summarization middleware marks its call (`internal_call_metadata()`), so the
    agent's message streams leave it out too; traces still record it."""
    metadata: dict[str, Any] = {"lc_source": SUMMARY_SOURCE_TAG}
    try:
        from langchain.agents.middleware.internal_call_transformer import internal_call_metadata
    except ImportError:  # langchain < 1.5, or langchain-core alone
        pass
    else:
        metadata.update(internal_call_metadata())
    try:
        from langgraph.constants import TAG_NOSTREAM
    except ImportError:  # no LangGraph: nothing streams the call
        TAG_NOSTREAM = "nostream"  # LangGraph's value, for a graph it runs in later
    return {"metadata": metadata, "tags": [TAG_NOSTREAM]}


@dataclass
class LangChainSummarizer:
    """Summarizes with a LangChain chat model (`BaseChatModel.ainvoke`; imported lazily).

    Example:
        ```python
        from langchain_openai import ChatOpenAI
        from historykit.plugins.langchain import LangChainSummarizer

        summarizer = LangChainSummarizer(ChatOpenAI(model="gpt-4o-mini"))
        text = await summarizer(messages)
        ```
    """

    chat_model: Any
    """A `langchain_core.language_models.BaseChatModel`."""
    instructions: str = SUMMARY_INSTRUCTIONS
    """What the model is asked to do; `{budget}` is replaced by `budget_tokens`."""
    budget_tokens: int = 2_000
    """The size the model is asked to stay under."""

    @property
    def model_name(self) -> str | None:
        for attr in ("model_name", "model", "model_id"):
            value = getattr(self.chat_model, attr, None)
            if isinstance(value, str) and value:
                return value
        return type(self.chat_model).__name__

    async def __call__(self, messages: Sequence[Message], focus: str | None = None) -> str:
        return await self.ask(summary_prompt(messages, focus))

    async def ask(self, prompt: str) -> str:
        """One request: the instructions, then `prompt`; the reply's text (the judge of
        `historykit.evaluation` asks its questions through this)."""
        from langchain_core.messages import HumanMessage, SystemMessage

        request = [SystemMessage(self.instructions.format(budget=self.budget_tokens)), HumanMessage(prompt)]
        try:
            response = await self.chat_model.ainvoke(request, config=summary_call_config())
        except ImportError as exc:
            raise UnusableSummarizerError(f"summarizer model {self.model_name!r}: {exc}") from None
        except Exception as exc:
            # The provider SDKs' HTTP errors (openai, anthropic, ...) carry the status they answered.
            status = getattr(exc, "status_code", None)
            if status not in UNUSABLE_STATUS:
                raise
            message = " ".join(str(getattr(exc, "message", exc)).split())
            raise UnusableSummarizerError(
                f"summarizer model {self.model_name!r}: the provider answered {status}: {message}"
            ) from None
        return _text(getattr(response, "content", response))


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for block in content:
            if isinstance(block, str):
                texts.append(block)
            elif isinstance(block, dict) and block.get("type") == "text":
                texts.append(str(block.get("text", "")))
        return "".join(texts)
    return str(content)
