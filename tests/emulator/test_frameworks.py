"""Agents of both frameworks against the emulator, through the official SDKs, without historykit.

A multi-turn tool-calling agent with thinking must run to completion with no rejected request, each
request extending the previous one: the emulator accepts what the frameworks send when nothing edits
the history, on a binding and a non-binding model name.
"""

from __future__ import annotations

import importlib.util
import itertools
import warnings
from typing import Any

import pytest

from tests.emulator import (
    BINDING_MODELS,
    NON_BINDING_ANTHROPIC_MODEL,
    ProviderEmulator,
    extends,
    is_binding_model,
    tool_loop,
)

BINDING = "claude-fable-5-2"
ANTHROPIC_MODELS = [BINDING, NON_BINDING_ANTHROPIC_MODEL]
OPENAI_MODEL = "gpt-5"
TOOL_TURNS = 4
PARALLEL = 2


def _emulator() -> ProviderEmulator:
    return ProviderEmulator(
        tool_loop(TOOL_TURNS, tool="read", parallel=PARALLEL, args=lambda i: {"path": f"f{i}.py"})
    )


def read(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


def _assert_clean_run(emulator: ProviderEmulator) -> None:
    assert emulator.rejected == []
    assert len(emulator.received) == TOOL_TURNS + 1
    accepted = emulator.accepted
    assert all(extends(a, b) for a, b in itertools.pairwise(accepted))


def _anthropic_thinking(model: str) -> dict[str, Any]:
    # The 5.5 generation and Fable/Mythos 5.x think adaptively; `enabled` with a budget is refused there.
    if model == NON_BINDING_ANTHROPIC_MODEL:
        return {"type": "enabled", "budget_tokens": 1024}
    return {"type": "adaptive"}


def _has_binding_retry() -> bool:
    try:
        return importlib.util.find_spec("pydantic_ai.models.anthropic._thinking_binding") is not None
    except ImportError:  # 1.x: `pydantic_ai.models.anthropic` is a module, not a package
        return False


# --- Pydantic AI --------------------------------------------------------------------------------


def _pydantic_ai_agent(model: Any, settings: dict[str, Any], instructions: Any = "Be careful.") -> Any:
    from pydantic_ai import Agent

    agent = Agent(model, instructions=instructions, model_settings=settings)
    agent.tool_plain(read)
    return agent


@pytest.mark.pydantic_ai
@pytest.mark.parametrize("model_name", ANTHROPIC_MODELS)
async def test_pydantic_ai_anthropic_model(model_name: str) -> None:
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    emulator = _emulator()
    model = AnthropicModel(
        model_name, provider=AnthropicProvider(anthropic_client=emulator.anthropic_client(async_=True))
    )
    agent = _pydantic_ai_agent(
        model, {"anthropic_thinking": _anthropic_thinking(model_name), "max_tokens": 4096}
    )
    result = await agent.run("Read the files.")
    assert result.output == "All done."
    _assert_clean_run(emulator)
    # Every tool turn carried thinking, and it was replayed.
    last = emulator.received[-1].body["messages"]
    assert (
        sum(1 for m in last if m["role"] == "assistant" and m["content"][0]["type"] == "thinking")
        == TOOL_TURNS
    )


@pytest.mark.pydantic_ai
def test_pydantic_ai_anthropic_model_streams_by_default() -> None:
    """Without `max_tokens`, Pydantic AI asks for the model's maximum output and streams (SSE)."""
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    emulator = _emulator()
    model = AnthropicModel(
        BINDING, provider=AnthropicProvider(anthropic_client=emulator.anthropic_client(async_=True))
    )
    result = _pydantic_ai_agent(model, {"anthropic_thinking": {"type": "adaptive"}}).run_sync(
        "Read the files."
    )
    assert result.output == "All done."
    _assert_clean_run(emulator)


@pytest.mark.pydantic_ai
@pytest.mark.parametrize("responses", [False, True], ids=["chat", "responses"])
async def test_pydantic_ai_openai_models(responses: bool) -> None:
    from pydantic_ai.providers.openai import OpenAIProvider

    emulator = _emulator()
    provider = OpenAIProvider(openai_client=emulator.openai_client(async_=True))
    if responses:
        from pydantic_ai.models.openai import OpenAIResponsesModel

        model: Any = OpenAIResponsesModel(OPENAI_MODEL, provider=provider)
        settings = {"openai_reasoning_effort": "low", "openai_reasoning_summary": "detailed"}
    else:
        from pydantic_ai.models.openai import OpenAIChatModel

        model = OpenAIChatModel(OPENAI_MODEL, provider=provider)
        settings = {"openai_reasoning_effort": "low"}
    result = await _pydantic_ai_agent(model, settings).run("Read the files.")
    assert result.output == "All done."
    _assert_clean_run(emulator)
    if responses:  # reasoning items went back with the calls they came with
        kinds = [i.get("type") for i in emulator.received[-1].body["input"]]
        assert kinds.count("reasoning") == TOOL_TURNS


@pytest.mark.pydantic_ai
@pytest.mark.skipif(not _has_binding_retry(), reason="Pydantic AI before 2.68 has no stale-thinking retry")
async def test_pydantic_ai_retries_a_stale_block_with_drop_block() -> None:
    """Instructions that change every call invalidate the replayed thinking on a binding model: the emulator
    rejects it as the API does, and Pydantic AI's retry with `drop_block` goes through and keeps asking."""
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    emulator = _emulator()
    model = AnthropicModel(
        BINDING, provider=AnthropicProvider(anthropic_client=emulator.anthropic_client(async_=True))
    )
    calls = 0

    def instructions() -> str:
        nonlocal calls
        calls += 1
        return f"Be careful. Call {calls}."

    agent = _pydantic_ai_agent(
        model, {"anthropic_thinking": {"type": "adaptive"}, "max_tokens": 4096}, instructions
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = await agent.run("Read the files.")
    assert result.output == "All done."
    rejected = emulator.rejected
    assert len(rejected) == 1 and rejected[0].rejection is not None
    assert rejected[0].rejection.rule == "R13"
    assert "The block is bound to a different conversation" in rejected[0].response["error"]["message"]
    assert any("rejected a replayed thinking block" in str(w.message) for w in caught)
    retried = emulator.received[emulator.received.index(rejected[0]) + 1 :]
    assert retried and all(
        r.body["thinking"]["block_binding"] == {"prefix_mismatch_behavior": "drop_block"} for r in retried
    )
    assert all("thinking-binding-controls-2026-08-01" in r.request.headers["anthropic-beta"] for r in retried)
    assert all(r.response.get("input_transformations") for r in retried)


# --- LangChain ----------------------------------------------------------------------------------


def _langchain_agent(llm: Any) -> Any:
    from langchain.agents import create_agent
    from langchain_core.tools import tool

    return create_agent(llm, tools=[tool(read)], system_prompt="Be careful.")


@pytest.mark.parametrize("model_name", ANTHROPIC_MODELS)
def test_langchain_chat_anthropic(model_name: str) -> None:
    emulator = _emulator()
    llm = emulator.chat_anthropic(model_name, thinking=_anthropic_thinking(model_name), max_tokens=4096)
    state = _langchain_agent(llm).invoke({"messages": [{"role": "user", "content": "Read the files."}]})
    assert state["messages"][-1].text == "All done."
    _assert_clean_run(emulator)


@pytest.mark.parametrize("responses", [False, True], ids=["chat", "responses"])
async def test_langchain_chat_openai(responses: bool) -> None:
    emulator = _emulator()
    kwargs: dict[str, Any] = {"use_responses_api": responses}
    if responses:
        kwargs["reasoning"] = {"effort": "low", "summary": "auto"}
    llm = emulator.chat_openai(OPENAI_MODEL, **kwargs)
    state = await _langchain_agent(llm).ainvoke(
        {"messages": [{"role": "user", "content": "Read the files."}]}
    )
    assert state["messages"][-1].text == "All done."
    _assert_clean_run(emulator)


@pytest.mark.pydantic_ai
@pytest.mark.parametrize(
    "model_name",
    [
        *BINDING_MODELS,
        "claude-opus-5-5-20261001",
        "claude-mythos-5-1",
        "claude-fable-5",
        "claude-opus-5",
        "claude-sonnet-5",
        NON_BINDING_ANTHROPIC_MODEL,
        "claude-haiku-4-5",
    ],
)
def test_binding_models_agree_with_pydantic_ai_profiles(model_name: str) -> None:
    """The emulator's one list of binding models says what Pydantic AI's profiles say (2.68+)."""
    from pydantic_ai.profiles.anthropic import anthropic_model_profile

    profile = anthropic_model_profile(model_name)
    # A mapping in 2.x, a dataclass in 1.x (which has no such flag).
    if isinstance(profile, dict):
        flag = profile.get("anthropic_binds_thinking_blocks")
    else:
        flag = getattr(profile, "anthropic_binds_thinking_blocks", None)
    if flag is None:
        pytest.skip("this Pydantic AI does not mark binding models")
    assert flag == is_binding_model(model_name)
