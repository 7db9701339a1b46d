"""`Pipeline`: composition, identity, async, reports."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

import pytest

from historykit import HistoryProcessor, Pipeline, ProcessContext, Report, StepNotes
from historykit._messages import Message, TextPart
from historykit.processors import Repair

HISTORY = [Message.system("sys"), Message.user("task"), Message.assistant("answer"), Message.user("more")]


@dataclass
class Shout(HistoryProcessor):
    """Upper-cases the text of user messages (a stand-in for a real processor)."""

    def process(self, messages: list[Message], ctx: ProcessContext) -> tuple[list[Message], StepNotes]:
        notes = StepNotes()
        out = []
        for m in messages:
            if m.role == "user" and m.text != m.text.upper():
                out.append(replace(m, parts=(TextPart(m.text.upper()),)))
                notes.replaced += 1
            else:
                out.append(m)
        return out, notes


def test_empty_pipeline_returns_the_very_same_objects() -> None:
    result = Pipeline([]).run(HISTORY)
    assert all(a is b for a, b in zip(result.messages, HISTORY)) and len(result.messages) == len(HISTORY)
    assert result.report.tokens_before == result.report.tokens_after


def test_or_composes_and_flattens() -> None:
    pipeline = Shout() | Repair() | Shout()
    assert isinstance(pipeline, Pipeline)
    assert [p.name for p in pipeline.processors] == ["Shout", "Repair", "Shout"]
    nested = Pipeline([pipeline, Repair()])
    assert len(nested.processors) == 4


def test_non_processor_is_rejected_with_its_index() -> None:
    with pytest.raises(TypeError, match="processor 1 is a builtins.function"):
        Pipeline([Repair(), lambda m: m])  # type: ignore[list-item]


def test_call_returns_messages_and_untouched_ones_are_kept() -> None:
    out = Shout()(HISTORY)
    assert out[0] is HISTORY[0] and out[2] is HISTORY[2]
    assert out[1].text == "TASK"


async def test_arun_matches_run() -> None:
    pipeline = Shout() | Repair()
    sync = pipeline.run(HISTORY)
    async_ = await pipeline.arun(HISTORY)
    assert sync.messages == async_.messages
    assert str(sync.report) == str(async_.report)


def test_report_counts_renders_and_reaches_callback(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[Report] = []
    with caplog.at_level(logging.DEBUG, logger="historykit"):
        result = Pipeline([Shout(), Repair()], on_report=seen.append).run(HISTORY, context_window=1_000)
    report = result.report
    assert seen == [report]
    assert [s.processor for s in report.steps] == ["Shout", "Repair"]
    assert report.steps[0].notes.replaced == 2 and report.changed
    assert report.context_window == 1_000 and report.window_source == "explicit"
    assert "Shout" in str(report) and "explicit" in str(report)
    assert "<table>" in report._repr_html_() and "<td>Shout</td>" in report._repr_html_()
    from rich.console import Console

    console = Console(record=True, width=140)
    console.print(report)
    assert "Shout" in console.export_text()
    assert "historykit pipeline" in caplog.text


def test_default_context_window_is_reported() -> None:
    report = Pipeline([]).run(HISTORY).report
    assert report.window_source == "default" and report.context_window > 0


@pytest.mark.parametrize("window", [0, -5, 1.5, True])
def test_bad_context_window(window: object) -> None:
    with pytest.raises(ValueError, match="context_window must be a positive int"):
        Pipeline([]).run(HISTORY, context_window=window)  # type: ignore[arg-type]


def test_input_list_is_never_mutated() -> None:
    history = list(HISTORY)
    Shout().run(history)
    assert history == HISTORY and all(a is b for a, b in zip(history, HISTORY))
