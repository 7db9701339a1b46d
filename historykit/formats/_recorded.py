"""What an agent log records about its model calls besides the messages, and what follows from it.

A Claude Code session log or a Codex rollout says more than the conversation: which model answered
each call, the usage the provider reported (the messages' `usage`), the window the agent ran under
(Codex's `model_context_window`), where the agent compacted its own history, and, by what it
lacks, what every call sent that the log does not hold. `historykit analyze` and `compact` read
these here:

- `transcript_model`: the model of the latest call the log names;
- `recorded_window`: the context window the log itself records (Codex), if any;
- `transcript_window`: the window the calls ran under: the caller's, else the recorded one, else
  the model's as genai-prices knows it, else historykit's default; with where it came from;
- `compaction_boundaries`: where the agent's own compaction started a new context;
- `unseen_inputs`: what the calls sent that the log does not hold.

Example:
    ```python
    from historykit.formats import read_transcript
    from historykit.formats._recorded import transcript_window, unseen_inputs

    transcript = read_transcript("session.jsonl")
    window = transcript_window(transcript.messages)  # ContextWindow(200000, 'genai-prices')
    unseen_inputs(transcript.messages)  # ('system prompt', 'tool definitions')
    ```
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

from historykit._context_window import ContextWindow, check_context_window
from historykit._messages import Message
from historykit._tokens import DEFAULT_CONTEXT_WINDOW
from historykit.formats._raw import RawRows

ALWAYS_UNSEEN = ("system prompt", "tool definitions")
"""What every call of an agent sends and no agent log holds."""

PARENT_CONVERSATION = "the parent conversation"
"""What a Claude Code compaction agent's log lacks: its one call sent the whole conversation it
summarised, which is in the parent session's log, not in its own."""

_COMPACTION_AGENT_PREFIX = "acompact-"
"""Claude Code names the agent that writes its compaction summary `acompact-<id>` (its log is
`subagents/agent-acompact-<id>.jsonl`)."""


def _rows(message: Message) -> RawRows | None:
    return message.native if isinstance(message.native, RawRows) else None


def compaction_boundaries(messages: Sequence[Message]) -> list[int]:
    """Indices of the messages where the agent's own compaction started a new context.

    The agent that wrote the transcript compacted its history there: the model calls after such a
    message saw it (the summary) and what follows, not what came before. Claude Code writes a
    `compact_boundary` row and flags the summary row after it `isCompactSummary`; a Codex rollout
    writes a `compacted` row.
    """
    found = []
    for index, msg in enumerate(messages):
        raw = _rows(msg)
        if raw is None:
            continue
        if raw.preceding or any(
            row.get("isCompactSummary") is True or row.get("type") == "compacted" for row in raw.rows
        ):
            found.append(index)
    return found


def transcript_model(messages: Sequence[Message]) -> str | None:
    """The model that answered the latest call whose model the log names; `None` when none does."""
    return next((m.model for m in reversed(messages) if m.role == "assistant" and m.model), None)


def recorded_window(messages: Sequence[Message]) -> int | None:
    """The context window the log records for its calls (a Codex token count's
    `model_context_window`, the latest one); `None` when the log records none (Claude Code does not)."""
    for msg in reversed(messages):
        raw = _rows(msg)
        for row in reversed(raw.rows if raw is not None else ()):
            payload = row.get("payload")
            info = payload.get("info") if isinstance(payload, dict) else None
            window = info.get("model_context_window") if isinstance(info, dict) else None
            if isinstance(window, int) and not isinstance(window, bool) and window > 0:
                return window
    return None


def transcript_window(messages: Sequence[Message], explicit: int | None = None) -> ContextWindow:
    """The context window the transcript's calls ran under, and where it came from.

    In order: `explicit` (the caller's, source `explicit`); the window the log records (Codex,
    `transcript`); the model's, from genai-prices (`genai-prices`), where a model whose long context is
    a beta a request opts into (Anthropic's 1M) counts its standard window unless a recorded call went
    past it; else historykit's default (`default`), also when genai-prices is not installed.
    """
    explicit = check_context_window(explicit, "window")
    if explicit is not None:
        return ContextWindow(explicit, "explicit")
    recorded = recorded_window(messages)
    if recorded is not None:
        return ContextWindow(recorded, "transcript")
    model = transcript_model(messages)
    known = known_model_window(model) if model is not None else None
    if known is not None:
        window, standard = known
        largest = max((m.usage.input_tokens for m in messages if m.usage is not None), default=0)
        return ContextWindow(window if largest > standard else standard, "genai-prices")
    return ContextWindow(DEFAULT_CONTEXT_WINDOW, "default")


@lru_cache(maxsize=64)
def known_model_window(model: str) -> tuple[int, int] | None:
    """`(window, standard window)` of a model as genai-prices knows it; `None` when it does not know
    the model or is not installed (`pip install 'historykit[models]'`).

    The standard window is what a request gets without opting in to more: for Anthropic, whose 1M
    context is a beta a request asks for, genai-prices lists the long window and prices the tokens
    past the standard one as a tier, so the first tier's start is the standard window.
    """
    try:
        from genai_prices.data_snapshot import get_snapshot
    except ImportError:
        return None
    try:
        provider, info = get_snapshot().find_provider_model(model, None, None, None)
    except LookupError:
        return None
    window = getattr(info, "context_window", None)
    if not isinstance(window, int) or isinstance(window, bool) or window <= 0:
        return None
    standard = window
    if getattr(provider, "id", None) == "anthropic":
        starts = [s for s in _tier_starts(getattr(info, "prices", None)) if 0 < s < window]
        standard = min(starts, default=window)
    return window, standard


def _tier_starts(prices: Any) -> Iterable[int]:
    """The token counts where a model's prices change (genai-prices `TieredPrices` tiers), whatever the
    nesting (one `ModelPrice`, or a list of `ConditionalPrice`s holding one each)."""
    for price in prices if isinstance(prices, list) else [prices]:
        price = getattr(price, "prices", price)  # a ConditionalPrice holds its ModelPrice
        for value in vars(price).values() if hasattr(price, "__dict__") else ():
            for tier in getattr(value, "tiers", None) or ():
                start = getattr(tier, "start", None)
                if isinstance(start, int):
                    yield start


def unseen_inputs(messages: Sequence[Message]) -> tuple[str, ...]:
    """What the transcript's calls sent that it does not hold, for reports.

    Always the system prompt and the tool definitions; for the log of Claude Code's compaction agent
    (`agent-acompact-*.jsonl`), also the parent conversation its call summarised.
    """
    for msg in messages:
        raw = _rows(msg)
        if raw is not None and raw.format == "claude-code":
            agent = raw.context.get("agentId")
            if isinstance(agent, str) and agent.startswith(_COMPACTION_AGENT_PREFIX):
                return (*ALWAYS_UNSEEN, PARENT_CONVERSATION)
            break
    return ALWAYS_UNSEEN
