"""One identity-cache policy, held by the pipeline: every processor's caches are bounded by the
`CachePolicy` its `ProcessContext` carries, and the same edits come out whatever the bound."""

from __future__ import annotations

import pytest

from historykit._identity_cache import DEFAULT_CACHE_POLICY, CachePolicy, IdentityCache
from historykit._messages import Message
from historykit._pipeline import Pipeline, ProcessContext
from historykit.errors import InvalidArgumentError
from historykit.processors._clear_tool_results import ClearToolResults
from historykit.processors._dedupe_file_reads import DedupeFileReads
from historykit.processors._offload_tool_outputs import OffloadToolOutputs
from historykit.processors._strip_thinking import StripThinking
from historykit.processors._trigger import Trigger

from .support import agent_session, exchange, tokens


def _pipeline(policy: CachePolicy | None = None) -> Pipeline:
    return Pipeline(
        [
            OffloadToolOutputs(max_tokens=300, keep_tokens=100),
            DedupeFileReads(trigger=None, min_gain=0),
            ClearToolResults(keep=2, trigger=Trigger(max_tokens=1), min_gain=0),
            StripThinking(trigger=None, min_gain=0),
        ],
        cache_policy=policy,
    )


def _history() -> list[Message]:
    history = agent_session(12)
    return history + exchange(0) + exchange(1)  # the same files read again: dedupe has work


def _caches(pipeline: Pipeline) -> list[IdentityCache[object]]:
    found: list[IdentityCache[object]] = []
    for step in pipeline.processors:
        found.extend(v for v in vars(step).values() if isinstance(v, IdentityCache))
        recogniser = getattr(step, "_recogniser", None)
        if recogniser is not None:
            found.append(recogniser._verdicts)
    return found


def test_the_pipeline_hands_its_policy_to_every_step() -> None:
    policy = CachePolicy(max_entries=7)
    pipeline = _pipeline(policy)
    seen: list[CachePolicy] = []

    class Spy(DedupeFileReads):
        def process(self, messages: list[Message], ctx: ProcessContext) -> tuple[list[Message], object]:  # type: ignore[override]
            seen.append(ctx.cache_policy)
            return super().process(messages, ctx)

    Pipeline([Spy()], cache_policy=policy).run(_history(), context_window=200_000)
    assert seen == [policy]
    assert pipeline.cache_policy is policy and Pipeline().cache_policy is DEFAULT_CACHE_POLICY


@pytest.mark.parametrize("eviction", ["oldest_half", "clear"])
def test_one_knob_bounds_every_cache_and_the_output_does_not_change(eviction: str) -> None:
    history = _history()
    window = tokens(history) // 2
    reference = _pipeline().run(history, context_window=window).messages
    small = _pipeline(CachePolicy(max_entries=5, eviction=eviction))  # type: ignore[arg-type]
    for _ in range(2):  # a cold call, then a warm one
        assert small.run(history, context_window=window).messages == reference
    caches = _caches(small)
    assert len(caches) >= 7 and all(len(cache) <= 5 for cache in caches), [len(c) for c in caches]
    assert sum(map(len, caches)) > 0


def test_a_processor_outside_a_pipeline_uses_the_default_policy() -> None:
    history = _history()
    ctx = ProcessContext(tokens(history) // 2, "explicit", Pipeline().counter)
    assert ctx.cache_policy is DEFAULT_CACHE_POLICY
    dedupe = DedupeFileReads(trigger=None, min_gain=0)
    out, _ = dedupe.process(history, ctx)
    assert out == _pipeline().processors[1].process(history, ctx)[0]


def test_an_identity_cache_hits_only_the_same_object() -> None:
    cache: IdentityCache[int] = IdentityCache()
    a, b = Message.user("x"), Message.user("x")
    cache.put(a, 1, DEFAULT_CACHE_POLICY)
    assert cache.get(a) == 1 and cache.get(b) is None and cache.get(a, "other") is None
    with pytest.raises(InvalidArgumentError, match="max_entries must be a positive int"):
        CachePolicy(max_entries=0)
    with pytest.raises(InvalidArgumentError, match="eviction must be"):
        CachePolicy(eviction="lru")  # type: ignore[arg-type]
