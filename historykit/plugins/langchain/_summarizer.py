"""Summarizing with a LangChain chat model: `LangChainSummarizer` (what `Summarize(model=...)` makes)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from historykit.messages import Message
from historykit.processors.summarizers import SUMMARY_INSTRUCTIONS, summary_prompt

__all__ = ["LangChainSummarizer"]


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

        response = await self.chat_model.ainvoke(
            [SystemMessage(self.instructions.format(budget=self.budget_tokens)), HumanMessage(prompt)]
        )
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
