"""`historykit.analysis`: the numbers `historykit analyze` prints, checked against first principles."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from historykit import Pipeline
from historykit._context_window import ContextWindow
from historykit._messages import Message
from historykit._tokens import DEFAULT_CONTEXT_WINDOW, TokenCounter
from historykit.analysis._analysis import analyze, replay
from historykit.formats import read_transcript
from historykit.processors import Repair
from tests.conftest import corpus_paths
from tests.strategies import examples, neutral_histories

SESSION = next(p for p in corpus_paths() if p.stem == "minisweagent__dschat-django-11910")


@settings(max_examples=examples(40), deadline=None)
@given(neutral_histories())
def test_an_identity_pipeline_changes_nothing_and_reuses_every_prefix(history: list[Message]) -> None:
    counter = TokenCounter()
    result = replay(history, Pipeline([], counter=counter), window=1_000, counter=counter)
    calls = [i for i, m in enumerate(history) if m.role == "assistant"]
    sizes = [sum(counter.count_message(m) for m in history[:i]) for i in calls]
    assert [c.before for c in result.calls] == [c.after for c in result.calls] == sizes
    # Each call's input starts with the whole previous input: a provider's cache reuses all of it.
    assert [c.reused for c in result.calls] == [0, *sizes[:-1]]
    assert result.processors == () and result.over_window_before == sum(1 for s in sizes if s > 1_000)


def test_repeated_reads_and_largest_outputs() -> None:
    messages = read_transcript(SESSION).messages
    analysis = analyze(messages, window=32_000, top=5)
    assert analysis.replay is None and len(analysis.largest_outputs) == 5
    tokens = [o.tokens for o in analysis.largest_outputs]
    assert tokens == sorted(tokens, reverse=True)
    top = analysis.repeated_reads[0]
    # The corpus README: the same file is read up to 22 times in this session (as overlapping ranges).
    assert top.path == "/testbed/django/db/migrations/operations/fields.py" and top.reads >= 15
    assert len(top.extents) == top.reads and "lines 1-200" in top.extents


def test_the_replay_counts_what_each_processor_freed() -> None:
    from historykit.cli import build_pipeline

    messages = read_transcript(SESSION).messages
    analysis = analyze(messages, window=32_000, pipeline=build_pipeline("clear,truncate"))
    assert analysis.replay is not None
    freed = {p.processor: p for p in analysis.replay.processors}
    assert freed["ClearToolResults"].calls > 0 and freed["ClearToolResults"].tokens_freed > 0
    assert analysis.replay.over_window_after == 0 < analysis.replay.over_window_before
    assert analysis.replay.sent_after < analysis.replay.sent_before


def test_renders_in_a_terminal_and_in_jupyter(tmp_path: Path) -> None:
    from rich.console import Console

    messages = read_transcript(SESSION).messages
    analysis = analyze(messages, window=32_000, pipeline=Pipeline([Repair()]), name="django")
    console = Console(record=True, width=120)
    console.print(analysis)
    text = console.export_text()
    assert "where the tokens go" in text and "files read more than once" in text
    page = analysis._repr_html_()
    assert (
        page.count("<table>") == sum(1 for _, headers, _ in analysis._tables() if headers)
        and "django" in page
    )
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    ax = analysis.plot()
    assert [line.get_label() for line in ax.get_lines()][:2] == ["raw history", "processed"]
    # The legend sits outside the axes, where it cannot cover the curves.
    ax.figure.canvas.draw()
    legend = ax.get_legend().get_window_extent()
    assert legend.x0 >= ax.get_window_extent().x1
    ax.figure.savefig(tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 0


def test_a_non_message_is_named() -> None:
    with pytest.raises(TypeError, match="message 1 is a dict"):
        analyze([Message.user("hi"), {"role": "user"}], window=1000)  # type: ignore[list-item]


def test_the_recorded_usage_and_the_agents_own_compaction() -> None:
    from historykit.formats import compaction_boundaries
    from tests.formats.helpers import CLAUDE_CODE

    messages = read_transcript(CLAUDE_CODE).messages
    boundaries = compaction_boundaries(messages)
    analysis = analyze(messages, window=8000, pipeline=Pipeline([Repair()]), boundaries=boundaries)
    replay = analysis.replay
    assert replay is not None and replay.boundaries == tuple(boundaries) == (7,)
    recorded = [m.usage.input_tokens for m in messages if m.role == "assistant" and m.usage]
    assert [c.recorded for c in replay.calls] == recorded
    assert replay.sent_recorded == sum(recorded) and replay.over_window_recorded == len(recorded)
    # After Claude Code's compaction the raw history starts again at its summary.
    ignoring = analyze(messages, window=8000, pipeline=Pipeline([Repair()]), boundaries=()).replay
    assert ignoring is not None
    first_after = next(n for n, c in enumerate(replay.calls) if c.call > 2)
    size = TokenCounter().count_message
    assert replay.calls[first_after].estimated_before == sum(size(m) for m in messages[7:8])
    assert ignoring.calls[first_after].estimated_before > replay.calls[first_after].estimated_before
    summary = analysis.to_dict()["replay"]["summary"]
    assert summary["agent_compactions"] == 1 and summary["recorded"]["sent"] == sum(recorded)
    assert summary["not_in_transcript"] == ["system prompt", "tool definitions"]
    from rich.console import Console

    console = Console(record=True, width=200)
    console.print(analysis)
    text = console.export_text()
    assert "recorded" in text and "system prompt and the tool definitions" in text
    assert "compacted its own history 1 time" in text


# ---------------------------------------------------------------------------------------------
# Raw agent logs: the transcript's window, counts anchored on its recorded usage, what it lacks
# ---------------------------------------------------------------------------------------------

REAL = Path(__file__).resolve().parent / "formats" / "data" / "real"
"""Real Claude Code session logs (tests/formats/data/real/SOURCE.md)."""


def _assistant(model: str, input_tokens: int) -> Message:
    from historykit._messages import ReportedUsage

    return replace(Message.assistant("ok"), model=model, usage=ReportedUsage(input_tokens, 10))


def test_the_window_is_the_transcripts_own() -> None:
    from historykit.formats._recorded import known_model_window, transcript_window
    from tests.formats.helpers import CODEX

    tool_heavy = read_transcript(REAL / "spotter-tool_heavy.jsonl").messages
    analysis = analyze(tool_heavy, pipeline=Pipeline([Repair()]))
    assert analysis.replay is not None
    assert (analysis.replay.window, analysis.replay.window_source) == (200_000, "genai-prices")
    assert analysis.replay.model == "claude-opus-4-6"
    # genai-prices lists Opus 4.6 at 1M, its opt-in beta; a call past 200k shows the beta was on.
    assert known_model_window("claude-opus-4-6") == (1_000_000, 200_000)
    beyond = [Message.user("go"), _assistant("claude-opus-4-6", 250_000)]
    assert transcript_window(beyond) == ContextWindow(1_000_000, "genai-prices")
    # A model whose listed window is its standard one, a rollout that records its window, and
    # what the caller says, which always wins.
    assert transcript_window([_assistant("claude-sonnet-4-5", 900)]).tokens == 200_000
    assert transcript_window(read_transcript(CODEX).messages) == ContextWindow(258_400, "transcript")
    assert transcript_window(tool_heavy, 32_000) == ContextWindow(32_000, "explicit")
    unknown = [Message.user("go"), _assistant("a-model-nobody-knows", 100)]
    assert transcript_window(unknown) == ContextWindow(DEFAULT_CONTEXT_WINDOW, "default")
    with pytest.raises(ValueError, match="window must be a positive int"):
        transcript_window(tool_heavy, 0)


def test_without_genai_prices_the_window_is_the_default_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from historykit.formats._recorded import known_model_window

    known_model_window.cache_clear()
    monkeypatch.setitem(sys.modules, "genai_prices.data_snapshot", None)  # the import fails
    try:
        messages = read_transcript(REAL / "spotter-tool_heavy.jsonl").messages
        analysis = analyze(messages, pipeline=Pipeline([Repair()]))
        assert analysis.replay is not None and analysis.replay.window == DEFAULT_CONTEXT_WINDOW
        heading = analysis._tables()[-3][0]
        assert "historykit's default: genai-prices does not know claude-opus-4-6" in heading
    finally:
        known_model_window.cache_clear()


def test_the_replay_counts_from_the_recorded_usage() -> None:
    messages = read_transcript(REAL / "spotter-tool_heavy.jsonl").messages
    replay = analyze(messages, pipeline=Pipeline([Repair()]), window=27_000).replay
    assert replay is not None and len(replay.calls) == 4 and replay.anchored
    first, *rest = replay.calls
    # The first call has no call before it: its messages only (the system prompt is not in the log).
    assert first.anchor is None and first.before == first.estimated_before < 100
    for call in rest:
        assert call.anchor is not None and messages[call.anchor].usage is not None
        assert call.recorded is not None and abs(call.before - call.recorded) <= 0.05 * call.recorded
    # The tokenizer alone is far off: the log does not hold the system prompt and tool definitions.
    assert rest[-1].estimated_before < 0.1 * rest[-1].before
    assert replay.over_window_before == replay.over_window_recorded == 1
    assert replay.unseen_estimate is not None and replay.unseen_estimate > 25_000


@settings(max_examples=examples(40), deadline=None)
@given(neutral_histories(), st.integers(min_value=1, max_value=300_000))
def test_each_call_is_counted_as_the_core_counts_it(history: list[Message], reported: int) -> None:
    from historykit._messages import ReportedUsage

    # Every other answer carries usage, as an agent log's do for the calls it recorded.
    answers = [i for i, m in enumerate(history) if m.role == "assistant"]
    for n, i in enumerate(answers):
        if n % 2 == 0:
            history[i] = replace(history[i], usage=ReportedUsage(reported + n, 7))
    counter = TokenCounter()
    result = replay(history, Pipeline([], counter=counter), window=1_000, counter=counter)
    assert [c.before for c in result.calls] == [counter.count(history[:i]).tokens for i in answers]
    assert [c.after for c in result.calls] == [c.before for c in result.calls]  # nothing removed


def test_a_compaction_agents_log_names_the_parent_conversation_it_lacks() -> None:
    from rich.console import Console

    messages = read_transcript(REAL / "spotter-4d5611e5-agent-acompact-e1f845.jsonl").messages
    analysis = analyze(messages, pipeline=Pipeline([Repair()]))
    replay = analysis.replay
    assert replay is not None and replay.unseen == (
        "system prompt",
        "tool definitions",
        "the parent conversation",
    )
    assert replay.unseen_estimate is not None and replay.unseen_estimate > 170_000
    assert analysis.to_dict()["replay"]["summary"]["not_in_transcript"][-1] == "the parent conversation"
    console = Console(record=True, width=400)
    console.print(analysis)
    text = console.export_text()
    assert "the parent conversation that this compaction agent's one call summarised" in text
    assert "about 173,392 tokens of it at the first call are not in the transcript" in text
    # A main session's log lacks only what every call sends.
    main = read_transcript(REAL / "spotter-tool_heavy.jsonl").messages
    assert analyze(main, pipeline=Pipeline([Repair()])).replay.unseen == ("system prompt", "tool definitions")  # type: ignore[union-attr]


def test_a_one_call_replay_plots_its_call() -> None:
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    messages = read_transcript(REAL / "spotter-short.jsonl").messages
    analysis = analyze(messages, pipeline=Pipeline([Repair()]))
    assert analysis.replay is not None and len(analysis.replay.calls) == 1
    ax = analysis.plot()
    data = [
        line
        for line in ax.get_lines()
        if len(line.get_xdata()) == 1 and not line.get_label().startswith("window")
    ]
    # Raw, processed and recorded: one point each, drawn as a dot (a one-point line draws nothing).
    assert [line.get_label() for line in data] == ["raw history", "processed", "recorded usage"]
    assert all(line.get_marker() not in (None, "", "None") for line in data)
    ax.figure.canvas.draw()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1"]  # one call, one whole-number tick
    plt.close(ax.figure)


# The last two calls' usage as the raw logs record it (Claude Code: input_tokens +
# cache_creation_input_tokens + cache_read_input_tokens of `message.usage`, and output_tokens; Codex:
# `last_token_usage` of the token_count event), read from the raw files the corpus sessions were
# converted from (corpus/README.md: marot/spotter 8cc42b0 / handgemacht-ai/spotter 0c7102a,
# AcidicSoil/codex-session-view 23314e0). Each pair: what identifies the answer, its input, its output.
LAST_TWO_CALLS = {
    "claudecode__spotter-8463c716": [
        ("All done. Here's the summary", 132_201, 1),
        ("That's a notification from a background task", 132_648, 1),
    ],
    "claudecode__spotter-258c7280": [
        ("That was a stale background task", 77_273, 1),
        ("Yes — everything is pushed and clean", 77_334, 85),
    ],
    "claudecode__spotter-fa812bfe": [
        ("toolu_01VMpcAVCZTdhvsuq5wpLfvX", 76_179, 19),
        ("All pushed. The only remaining unstaged change", 76_350, 1),
    ],
    "claudecode__spotter-6c2214d7-subagent-afc096d": [
        ("toolu_01VmjNYeU5YgYT225asja74j", 49_245, 1),
        ("Excellent! Now I have all the information needed", 49_695, 4),
    ],
    "codex__sessionview-019a93b9": [
        ("call_lfCwuU2mObc6TfAufhHsRVVs", 40_766, 11_803),
        ("call_WFt5cO7KuouOdcWkDjn5K63T", 52_645, 731),
    ],
}


@pytest.mark.parametrize("session", sorted(LAST_TWO_CALLS))
def test_the_last_call_of_a_long_real_session_is_counted_within_15_percent(session: str) -> None:
    from historykit._messages import ReportedUsage

    path = next(p for p in corpus_paths() if p.stem == session)
    messages = read_transcript(path).messages
    answers = [i for i, m in enumerate(messages) if m.role == "assistant"]
    for index, (marker, input_tokens, output_tokens) in zip(answers[-2:], LAST_TWO_CALLS[session]):
        answer = messages[index]
        assert answer.text.startswith(marker) or any(c.id == marker for c in answer.tool_calls), marker
        messages[index] = replace(answer, usage=ReportedUsage(input_tokens, output_tokens))
    # The corpus keeps the history before Claude Code's compaction: its summary starts the context.
    summaries = [
        i for i, m in enumerate(messages) if m.role == "user" and m.text.startswith("This session is being")
    ]
    replay = analyze(messages, window=200_000, pipeline=Pipeline([Repair()]), boundaries=summaries).replay
    assert replay is not None
    last = replay.calls[-1]
    assert last.recorded is not None and abs(last.before - last.recorded) <= 0.15 * last.recorded
    # The messages alone, as the replay counted before it used the recorded usage, are far off.
    assert last.estimated_before < 0.7 * last.recorded
