"""Session replay and prompt-cache pricing, shared by the benchmarks.

A corpus session is replayed model call by model call: call t sees every message before the t-th
assistant message. A strategy turns that input into what the model is sent, in one of two modes:

- `persistent`: the strategy's previous output carries forward, and the messages that arrived since
  are appended to it (what Pydantic AI capabilities and LangGraph state edits do);
- `view`: every call processes the raw, ever-growing history (a view-only hook).

For historykit, both modes must send the same view (`historykit._view`); each call's view is
recorded as a digest so the two modes can be compared call by call. Thinking binding (R13) is
metered too: the model response at each call is produced under the view sent at that call, so a
later call that replays its thinking after a different prefix would be rejected by a model that
binds thinking (`Meter` counts those calls).

Each call's input is priced as a provider prompt cache prices it: the longest run of leading
messages identical to the previous call's input is read from the cache (0.1 per token), the rest
is written (1.25 per token); what a summarizer reads costs 1.0 per token. Everything is counted
with one `TokenCounter` on neutral messages, whatever framework the strategy ran in, so the
numbers compare.

Example:
    ```python
    from replay import Meter, call_points, load_sessions

    for name, session in load_sessions():
        meter = Meter(window=32_000, counter=counter)
        for t in call_points(session):
            meter.add(process(session[:t]), newest=session[t - 1])
        print(name, meter.result.cost)
    ```
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from historykit._digests import MessageDigests
from historykit._messages import Message, ThinkingPart, ToolResultPart
from historykit._pipeline import HistoryProcessor, Pipeline
from historykit._tokens import TokenCounter
from historykit._validity import check_neutral
from historykit.formats import read_chat_jsonl
from historykit.processors._summarizers import SUMMARY_INSTRUCTIONS, ExtractiveSummarizer, render_transcript

__all__ = [
    "CACHE_READ",
    "CACHE_WRITE",
    "CORPUS",
    "SUMMARIZER_INPUT",
    "CountingSummarizer",
    "Meter",
    "Mode",
    "Result",
    "arrival_tokens",
    "call_points",
    "floor_tokens",
    "load_sessions",
    "replay_processor",
    "total",
]

CORPUS = Path(os.environ.get("HISTORYKIT_CORPUS", Path(__file__).resolve().parent.parent / "corpus"))
"""The corpus of real agent sessions (`HISTORYKIT_CORPUS` overrides)."""

CACHE_READ = 0.1
"""Price of an input token served from the provider's prompt cache (the previous call's prefix)."""
CACHE_WRITE = 1.25
"""Price of an input token that is not (Anthropic charges 1.25x to write it to the cache)."""
SUMMARIZER_INPUT = 1.0
"""Price of a token a summarizer reads."""

Mode = Literal["persistent", "view"]


def load_sessions(names: Iterable[str] = ()) -> list[tuple[str, list[Message]]]:
    """The corpus sessions as neutral messages, smallest file first; `names` filters by substring."""
    wanted = list(names)
    paths = sorted(CORPUS.glob("*.jsonl"), key=lambda p: p.stat().st_size)
    if not paths:
        raise SystemExit(f"no corpus sessions in {CORPUS} (set HISTORYKIT_CORPUS)")
    return [(p.stem, read_chat_jsonl(p)) for p in paths if not wanted or any(w in p.stem for w in wanted)]


def call_points(messages: Sequence[Message]) -> list[int]:
    """The model calls a history records: call t sees `messages[:i]` for the t-th assistant message `i`."""
    return [i for i, m in enumerate(messages) if m.role == "assistant" and i > 0]


@dataclass
class Result:
    """One strategy on one session (or a total over sessions) at one window and mode."""

    calls: int = 0
    over_window: int = 0
    """Calls whose input is over the context window."""
    dropped_newest: int = 0
    """Calls whose input does not end with the newest message (unchanged, or with its tool results
    shortened to fit the window)."""
    violations: int = 0
    """Calls whose input breaks a provider rule (`historykit.check`) that the raw input did not."""
    unavoidable: int = 0
    """Calls whose system prompt, task and final request (the newest assistant message and what
    answers it) are by themselves over the window: no processor may make those fit."""
    input_tokens: int = 0
    cached_tokens: int = 0
    """Input tokens identical to a prefix of the previous call's input."""
    summarizer_tokens: int = 0
    summaries: int = 0
    """Summarizer calls."""
    peak_tokens: int = 0
    thinking_calls: int = 0
    """Calls whose input replays thinking."""
    binding_rejected: int = 0
    """Calls a model that binds thinking (R13) would reject: a replayed thinking block follows a
    history other than the one it was produced under."""
    thinking_dropped_tokens: int = 0
    """Thinking tokens the pipeline dropped because an edit made them invalid on a binding model."""
    views: list[str] = field(default_factory=list, repr=False, compare=False)
    """A digest of each call's input, in order (not summed into totals)."""

    @property
    def cost(self) -> float:
        written = self.input_tokens - self.cached_tokens
        return (
            CACHE_READ * self.cached_tokens
            + CACHE_WRITE * written
            + SUMMARIZER_INPUT * self.summarizer_tokens
        )

    @property
    def cached_share(self) -> float:
        return self.cached_tokens / self.input_tokens if self.input_tokens else 1.0

    def __iadd__(self, other: Result) -> Result:
        for name in (
            "calls",
            "over_window",
            "dropped_newest",
            "violations",
            "unavoidable",
            "input_tokens",
            "cached_tokens",
            "summarizer_tokens",
            "summaries",
            "thinking_calls",
            "binding_rejected",
            "thinking_dropped_tokens",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.peak_tokens = max(self.peak_tokens, other.peak_tokens)
        return self


def total(results: Iterable[Result]) -> Result:
    out = Result()
    for r in results:
        out += r
    return out


@dataclass
class Meter:
    """Prices a replay call by call and counts what went wrong."""

    window: int
    counter: TokenCounter
    check: bool = True
    """Also run `check_neutral` on every input (the slowest part of metering)."""
    result: Result = field(default_factory=Result)
    _previous: Sequence[Message] = ()
    _digests: MessageDigests = field(default_factory=MessageDigests)
    _produced: dict[tuple[str, str | None, str | None], set[bytes]] = field(default_factory=dict)
    """A thinking block (text, signature, id) -> the digests of the histories it was produced after.
    By content, not identity: an anchor that converts messages to its framework and back still
    replays the same block. The corpus has no signatures, and a few blocks repeat word for word
    ("Let's view."): such a block passes if any of its productions matches (a real signature tells
    them apart)."""

    def add(
        self,
        sent: Sequence[Message],
        newest: Message,
        *,
        raw: Sequence[Message] | None = None,
        summarizer_tokens: int = 0,
        summaries: int = 0,
    ) -> None:
        """One call: `sent` is what the model got, `newest` the newest raw message it had to see.

        `raw` is the unprocessed input; a rule broken in `sent` counts only when `raw` kept it.
        """
        r = self.result
        count = self.counter.count_message
        sizes = [count(m) for m in sent]
        tokens = sum(sizes)
        shared = 0
        for a, b in zip(self._previous, sent):
            if a is not b and a != b:
                break
            shared += 1
        r.calls += 1
        r.input_tokens += tokens
        r.cached_tokens += sum(sizes[:shared])
        r.summarizer_tokens += summarizer_tokens
        r.summaries += summaries
        r.peak_tokens = max(r.peak_tokens, tokens)
        r.over_window += tokens > self.window
        r.dropped_newest += not sent or not _kept(sent[-1], newest)
        if raw is not None:
            r.unavoidable += floor_tokens(raw, self.counter) > self.window
        if self.check and check_neutral(sent) and (raw is None or not check_neutral(raw)):
            r.violations += 1
        chain = self._chain(sent)
        r.views.append(chain[-1].hex())
        replays = False
        rejected = False
        for index, msg in enumerate(sent):
            for part in msg.parts:
                if not isinstance(part, ThinkingPart):
                    continue
                replays = True
                produced = self._produced.get((part.text, part.signature, part.id))
                if produced is not None and chain[index] not in produced:
                    rejected = True
        r.thinking_calls += replays
        r.binding_rejected += rejected
        self._previous = sent

    def responded(self, response: Message) -> None:
        """The model's answer to the latest call: its thinking is bound to what that call sent."""
        if not self._previous:
            return
        bound_to = self._chain(self._previous)[-1]
        for part in response.parts:
            if isinstance(part, ThinkingPart):
                self._produced.setdefault((part.text, part.signature, part.id), set()).add(bound_to)

    def _chain(self, messages: Sequence[Message]) -> list[bytes]:
        """Digest of `messages[:i]` for every i (a hash chain over the message digests)."""
        h = hashlib.blake2b(digest_size=16)
        out = [h.digest()]
        for msg in messages:
            h.update(self._digests.digest(msg))
            out.append(h.digest())
        return out


def _kept(sent: Message, newest: Message) -> bool:
    """`sent` is `newest`, or `newest` with tool results shortened to fit the window: same parts,
    same calls answered, each changed result keeping the head and the tail of the original. (A
    result replaced by a placeholder is not kept: the model no longer sees it.)"""
    if sent is newest or sent == newest:
        return True
    return (
        sent.role == newest.role
        and len(sent.parts) == len(newest.parts)
        and all(a == b or _shortened(a, b) for a, b in zip(sent.parts, newest.parts))
    )


def _shortened(sent: object, original: object) -> bool:
    if not (isinstance(sent, ToolResultPart) and isinstance(original, ToolResultPart)):
        return False
    a, b = sent.content, original.content
    if sent.tool_call_id != original.tool_call_id or len(a) >= len(b):
        return False
    head = _common_prefix(a, b)
    tail = _common_prefix(a[::-1], b[::-1])
    return head > 0 and tail > 0 and head + tail >= len(a) // 2


def _common_prefix(a: str, b: str) -> int:
    """Characters `a` and `b` share at their start."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def arrival_tokens(session: Sequence[Message], counter: TokenCounter) -> int:
    """Tokens of the messages that arrive between calls (all of the first call's input, then
    each call's new messages): no call can have them in the previous call's prefix, whatever the
    strategy, so they are always priced as written."""
    sizes = [counter.count_message(m) for m in session]
    points = call_points(session)
    return sum(sizes[: points[-1]]) if points else 0


def floor_tokens(raw: Sequence[Message], counter: TokenCounter) -> int:
    """What a call on `raw` must send whatever a processor does: the system messages, the first user
    message (the task), and the final request with the assistant message it answers."""
    count = counter.count_message
    tail = len(raw)
    while tail > 0 and raw[tail - 1].role in ("user", "tool"):
        tail -= 1
    if 0 < tail < len(raw) and raw[tail - 1].role == "assistant":
        tail -= 1
    head = [i for i, m in enumerate(raw[:tail]) if m.role == "system"]
    first_user = next((i for i, m in enumerate(raw[:tail]) if m.role == "user"), None)
    if first_user is not None:
        head.append(first_user)
    return sum(count(raw[i]) for i in head) + sum(count(m) for m in raw[tail:])


@dataclass
class CountingSummarizer:
    """The extractive summarizer, counting what an LLM summarizer would have read instead.

    `tokens` grows by the size of the prompt `PydanticAISummarizer` would send for the same
    messages (instructions and transcript), so a replay can price the summaries as LLM calls.
    """

    counter: TokenCounter
    budget_tokens: int = 2_000
    inner: Callable[[Sequence[Message]], str] = field(default_factory=ExtractiveSummarizer)
    tokens: int = 0
    calls: int = 0
    written: int = 0
    """Tokens of the summaries written."""
    model_name: str | None = None

    def __call__(self, messages: Sequence[Message]) -> str:
        prompt = SUMMARY_INSTRUCTIONS.format(budget=self.budget_tokens) + "\n\n" + render_transcript(messages)
        self.tokens += self.counter.count_text(prompt)
        self.calls += 1
        text = self.inner(messages)
        self.written += self.counter.count_text(text)
        return text


def replay_processor(
    processor: HistoryProcessor,
    session: Sequence[Message],
    *,
    window: int,
    mode: Mode,
    counter: TokenCounter,
    summarizer: CountingSummarizer | None = None,
    check: bool = True,
    binds_thinking: bool = False,
) -> Result:
    """Replay `session` call by call through a historykit processor (or pipeline) on neutral messages.

    `binds_thinking`: process as for a model that binds thinking (R13); the meter counts the calls
    such a model would reject either way.
    """
    pipeline = processor if isinstance(processor, Pipeline) else Pipeline([processor], counter=counter)
    meter = Meter(window, counter, check=check)
    carried: list[Message] = []
    previous = 0
    # Named as the integrations name it (a thread, a run): without a key no call shares anything
    # with the next, so view-only mode re-derived every view and rewrote every summary (7.9x).
    conversation = object()
    for t in call_points(session):
        history = carried + list(session[previous:t]) if mode == "persistent" else list(session[:t])
        tokens_before = summarizer.tokens if summarizer else 0
        calls_before = summarizer.calls if summarizer else 0
        result = pipeline.run(
            history,
            window,
            counter=counter,
            mode=mode,
            binds_thinking=binds_thinking,
            conversation=conversation,
        )
        out = result.messages
        meter.add(
            out,
            session[t - 1],
            raw=session[:t],
            summarizer_tokens=(summarizer.tokens - tokens_before) if summarizer else 0,
            summaries=(summarizer.calls - calls_before) if summarizer else 0,
        )
        meter.result.thinking_dropped_tokens += result.report.thinking_dropped[1]
        meter.responded(session[t])
        carried, previous = out, t
    return meter.result
