"""`historykit.analysis`: the numbers `historykit analyze` prints, checked against first principles."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings

from historykit import Pipeline
from historykit.analysis import analyze, replay
from historykit.formats import read_transcript
from historykit.messages import Message
from historykit.processors import Repair
from historykit.tokens import TokenCounter
from tests.conftest import corpus_paths
from tests.strategies import neutral_histories

SESSION = next(p for p in corpus_paths() if p.stem == "minisweagent__dschat-django-11910")


@settings(max_examples=40, deadline=None)
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
    ignoring = analyze(messages, window=8000, pipeline=Pipeline([Repair()])).replay
    assert ignoring is not None
    first_after = next(n for n, c in enumerate(replay.calls) if c.call > 2)
    size = TokenCounter().count_message
    assert replay.calls[first_after].before == sum(size(m) for m in messages[7:8])
    assert ignoring.calls[first_after].before > replay.calls[first_after].before
    summary = analysis.to_dict()["replay"]["summary"]
    assert summary["agent_compactions"] == 1 and summary["recorded"]["sent"] == sum(recorded)
    assert summary["not_in_transcript"] == ["system prompt", "tool definitions"]
    from rich.console import Console

    console = Console(record=True, width=200)
    console.print(analysis)
    text = console.export_text()
    assert "recorded" in text and "system prompt and the tool definitions" in text
    assert "compacted its own history 1 time" in text
