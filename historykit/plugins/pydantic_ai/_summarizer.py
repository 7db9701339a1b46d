"""Summarizing with a Pydantic AI model: `PydanticAISummarizer` (what `Summarize(model=...)` makes)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from historykit._messages import Message
from historykit.processors._summarizers import SUMMARY_INSTRUCTIONS, UnusableSummarizerError, summary_prompt

# Provider answers that say the summarizer cannot work as configured (a bad key, no access, no such
# model): the same on every attempt, so they are raised at once instead of retried or truncated.
UNUSABLE_STATUS = frozenset({401, 403, 404})


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

    def __post_init__(self) -> None:
        if isinstance(self.model, str):
            _check_model_name(self.model)

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
        `historykit.evaluation` asks its questions through this), a provider's refusal of the model
        or its key as `UnusableSummarizerError`."""
        from pydantic_ai.exceptions import ModelHTTPError, UserError

        try:
            return await self._ask(prompt)
        except UserError as exc:  # Pydantic AI's own word for a configuration mistake (a missing key)
            raise UnusableSummarizerError(f"summarizer model {self.model_name!r}: {exc}") from None
        except ImportError as exc:
            raise UnusableSummarizerError(f"summarizer model {self.model_name!r}: {exc}") from None
        except ModelHTTPError as exc:
            if exc.status_code not in UNUSABLE_STATUS:
                raise
            raise UnusableSummarizerError(
                f"summarizer model {self.model_name!r}: the provider answered {exc.status_code}: "
                f"{_one_line(exc.body)}"
            ) from None

    async def _ask(self, prompt: str) -> str:
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


class _ProviderFound(Exception):
    """Stops `infer_model` once the provider class is known: nothing is built, no key is needed."""


def _check_model_name(name: str) -> None:
    """Raise `UnusableSummarizerError` for a model name Pydantic AI cannot resolve (an unknown
    provider, a name without one) or whose provider package is not installed; the API key and the
    model itself are only checked by the first call (a key may be set later)."""
    import inspect

    from pydantic_ai.exceptions import UserError
    from pydantic_ai.models import infer_model
    from pydantic_ai.providers import infer_provider_class

    def provider_class_only(provider: str) -> Any:
        infer_provider_class(provider)
        raise _ProviderFound

    if "provider_factory" not in inspect.signature(infer_model).parameters:
        return  # an older Pydantic AI: the first call says what is wrong (and is not retried)
    try:
        infer_model(name, provider_factory=provider_class_only)
    except _ProviderFound:
        return
    except ImportError as exc:
        raise UnusableSummarizerError(f"summarizer model {name!r}: {_one_line(str(exc))}") from None
    except (UserError, ValueError):
        pass
    else:
        return  # a model built without a provider ("test")
    # Pydantic AI's own message names the unknown model and suggests a known one.
    try:
        infer_model(name)
    except UserError as exc:
        raise UnusableSummarizerError(f"summarizer model {name!r}: {_one_line(str(exc))}") from None
    except Exception as exc:  # whatever it is, the name cannot be used
        raise UnusableSummarizerError(f"summarizer model {name!r}: {_one_line(str(exc))}") from None
    raise UnusableSummarizerError(f"summarizer model {name!r}: Pydantic AI knows no such provider")


def _one_line(text: object) -> str:
    return " ".join(str(text).split())
