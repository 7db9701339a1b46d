"""Summarizing with a Pydantic AI model: `PydanticAISummarizer` (what `Summarize(model=...)` makes)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from historykit.messages import Message
from historykit.processors.summarizers import SUMMARY_INSTRUCTIONS, summary_prompt

__all__ = ["PydanticAISummarizer", "is_pydantic_ai_model"]


def _type_modules(obj: object) -> list[str]:
    return [f"{c.__module__}.{c.__qualname__}" for c in type(obj).__mro__]


def is_pydantic_ai_model(obj: object) -> bool:
    """Whether `obj` is a Pydantic AI object (a `Model`, an `Agent`), found without importing Pydantic AI."""
    return any(n.startswith("pydantic_ai.") for n in _type_modules(obj))


@dataclass
class PydanticAISummarizer:
    """Summarizes with a Pydantic AI model name, `Model` or `Agent` (imported lazily).

    A model name or `Model` runs in an agent with the summary instructions; an `Agent` you give is
    run as it is, with the instructions at the top of the prompt.

    Example:
        ```python
        from pydantic_ai.models.function import FunctionModel
        from historykit.plugins.pydantic_ai import PydanticAISummarizer

        summarizer = PydanticAISummarizer("openai:gpt-4o-mini")
        summarizer = PydanticAISummarizer(FunctionModel(my_function))
        text = await summarizer(messages)
        ```
    """

    model: Any
    """A model name (`"provider:model"`), a `pydantic_ai.models.Model`, or a `pydantic_ai.Agent`."""
    instructions: str = SUMMARY_INSTRUCTIONS
    """What the model is asked to do; `{budget}` is replaced by `budget_tokens`."""
    budget_tokens: int = 2_000
    """The size the model is asked to stay under."""
    _agent: Any = field(default=None, init=False, repr=False)

    @property
    def model_name(self) -> str | None:
        model = self.model
        if _is_agent(model):
            model = model.model
            if model is None:
                return getattr(self.model, "name", None)
        if isinstance(model, str):
            return model
        return getattr(model, "model_name", None) or type(model).__name__

    async def __call__(self, messages: Sequence[Message], focus: str | None = None) -> str:
        return await self.ask(summary_prompt(messages, focus))

    async def ask(self, prompt: str) -> str:
        """One run: the instructions, then `prompt`; the output as text (the judge of
        `historykit.evaluation` asks its questions through this)."""
        instructions = self.instructions.format(budget=self.budget_tokens)
        if _is_agent(self.model):
            result = await self.model.run(f"{instructions}\n\n{prompt}")
        else:
            if self._agent is None:
                from pydantic_ai import Agent

                self._agent = Agent(self.model, instructions=instructions, output_type=str)
            result = await self._agent.run(prompt)
        output = result.output
        return output if isinstance(output, str) else str(output)


def _is_agent(obj: object) -> bool:
    return any(
        name.startswith("pydantic_ai.") and name.endswith("AbstractAgent") for name in _type_modules(obj)
    )
