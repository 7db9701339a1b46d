"""Judge mode: each probe's question asked with the compacted view and with the full history,
through Pydantic AI and the official Anthropic SDK against the provider emulator (in-process, and
over HTTP for `historykit eval --judge MODEL`, whose model is built from its name).

The emulated judge *recites* the history it was shown: its reply holds a probe's answer exactly
when the history it was given does. So its verdicts must agree with string matching's at the same
call (held with the view, held with the full history), which checks that each question went with
the right call's view and full history, and that the answer check reads the reply."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from historykit import default_pipeline
from historykit._messages import Message
from historykit.cli import app
from historykit.errors import ArgumentTypeError, InvalidArgumentError
from historykit.evaluation import JUDGE_INSTRUCTIONS, KINDS, evaluate, extract_probes, judge_question
from historykit.formats import read_chat_jsonl
from historykit.formats._openai_chat import write_chat_jsonl
from historykit.processors import Repair
from tests.conftest import corpus_paths
from tests.emulator import EmulatedRequest, ProviderEmulator, Turn
from tests.emulator.http_server import serve_http
from tests.evaluation.transcripts import SECRET, ForgetSecret, session

pytestmark = pytest.mark.pydantic_ai

MODEL = "claude-haiku-4-5"
_HISTORY = re.compile(r"<history>\n(.*)\n</history>", re.DOTALL)


def _prompt(request: EmulatedRequest) -> str:
    content = request.body["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    return "\n".join(block.get("text", "") for block in content)


def recite(request: EmulatedRequest) -> Turn:
    """A judge that answers with the whole history it was shown."""
    found = _HISTORY.search(_prompt(request))
    return Turn(text=found.group(1) if found else "not in the history")


def anthropic_model(emulator: ProviderEmulator) -> Any:
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    return AnthropicModel(
        MODEL, provider=AnthropicProvider(anthropic_client=emulator.anthropic_client(async_=True))
    )


def corpus_session(stem: str) -> list[Message]:
    path = next((p for p in corpus_paths() if p.stem == stem), None)
    if path is None:
        pytest.skip(f"corpus session {stem} missing")
    return read_chat_jsonl(Path(path))


@pytest.mark.parametrize("stem", ["sweagent__gpt4-pydicom-1458", "claudecode__spotter-258c7280"])
def test_no_question_holds_its_own_answer(stem: str) -> None:
    for messages in (session(), corpus_session(stem)):
        probes = extract_probes(messages)
        assert {p.kind for p in probes} >= {"recall", "artifacts", "continuation"}
        for probe in probes:
            question, expected = judge_question(probe, messages)
            assert expected, (probe, question)
            if probe.kind == "recall":
                assert probe.needles[0] not in question and "____" in question


def test_a_reciting_judge_agrees_with_matching_on_view_and_full_history() -> None:
    messages = session()
    emulator = ProviderEmulator(recite)
    evaluation = evaluate(
        messages, ForgetSecret() | Repair(), window=200_000, judge=anthropic_model(emulator)
    )
    # Every probe some call scored is asked about (no cap given), each once.
    assert sorted(j.probe for j in evaluation.judged) == sorted(
        {n for n, p in enumerate(evaluation.probes) if any(p.active_at(c.point) for c in evaluation.calls)}
    )
    for judged in evaluation.judged:
        assert judged.full_correct, judged
        assert judged.view_correct == (judged.matched == "held"), judged
        assert judged.call == max(
            c.call for c in evaluation.calls if evaluation.probes[judged.probe].active_at(c.point)
        )
    # The processor forgets SECRET: the judge cannot give it from the view, only from the full history.
    secret = [j for j in evaluation.judged if evaluation.probes[j.probe].needles == (SECRET,)]
    assert len(secret) == 1 and not secret[0].view_correct and secret[0].full_correct
    assert not emulator.rejected
    assert len(emulator.accepted) == 2 * len(evaluation.judged)
    assert all(JUDGE_INSTRUCTIONS.split(",")[0] in json.dumps(r.request.body) for r in emulator.accepted)
    kinds = {k.kind: k for k in evaluation.judge_kinds}
    assert kinds["recall"].full_correct == kinds["recall"].asked > kinds["recall"].view_correct
    data = evaluation.to_dict()["judge"]
    assert sum(k["asked"] for k in data["kinds"].values()) == len(data["probes"]) == len(evaluation.judged)


def test_a_judge_that_knows_nothing_is_never_right_and_judge_probes_caps_the_questions() -> None:
    messages = session()
    asked: list[str] = []

    async def ignorant(prompt: str) -> str:
        asked.append(prompt)
        return "not in the history"

    evaluation = evaluate(messages, Repair(), window=200_000, judge=ignorant, judge_probes=3)
    assert len(evaluation.judged) == 3 and len(asked) == 6
    # The kinds are taken in turn: three probes, three kinds.
    assert len({evaluation.probes[j.probe].kind for j in evaluation.judged}) == 3
    assert not any(j.view_correct or j.full_correct for j in evaluation.judged)
    assert all(k.view_correct == k.full_correct == 0 for k in evaluation.judge_kinds)


def test_a_refused_request_is_recorded_and_the_other_answers_kept() -> None:
    messages = session()
    # A window the compacted views fit and the full histories at the late calls do not.
    emulator = ProviderEmulator(recite, context_windows={MODEL: 1_500})
    evaluation = evaluate(
        messages, ForgetSecret() | Repair(), window=200_000, judge=anthropic_model(emulator)
    )
    refused = [j for j in evaluation.judged if j.full_error is not None]
    assert refused and emulator.rejected
    assert all(j.full_answer is None and not j.full_correct for j in refused)
    assert all("400" in (j.full_error or "") or "prompt is too long" in (j.full_error or "") for j in refused)
    assert any(j.view_answer is not None for j in evaluation.judged)


def test_a_bad_judge_fails_before_the_replay() -> None:
    with pytest.raises(ArgumentTypeError, match="judge must be"):
        evaluate(session(), Repair(), judge=42)
    with pytest.raises(InvalidArgumentError, match="judge_probes"):
        evaluate(session(), Repair(), judge=lambda prompt: "", judge_probes=-1)


def test_eval_judge_model_by_name_over_http(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`historykit eval --judge anthropic:MODEL` builds the model from its name; the Anthropic SDK
    finds the emulator through its documented environment variables."""
    path = tmp_path / "session.jsonl"
    write_chat_jsonl(session(), path)
    emulator = ProviderEmulator(recite)
    with serve_http(emulator) as url:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "emulated")
        result = CliRunner().invoke(
            app,
            [
                "eval",
                str(path),
                "-w",
                "200000",
                "--judge",
                f"anthropic:{MODEL}",
                "--judge-probes",
                "4",
                "--json",
            ],
        )
        text = CliRunner().invoke(
            app, ["eval", str(path), "-w", "200000", "--judge", f"anthropic:{MODEL}", "--judge-probes", "2"]
        )
    assert result.exit_code == 0, result.stderr
    judge = json.loads(result.stdout)[0]["judge"]
    assert len(judge["probes"]) == 4
    assert all(p["full_correct"] for p in judge["probes"])
    assert set(judge["kinds"]) == set(KINDS)
    assert text.exit_code == 0, text.stderr
    assert "right with view" in text.stdout and "right with full history" in text.stdout
    assert len(emulator.accepted) == 2 * 4 + 2 * 2 and not emulator.rejected


def test_a_langchain_chat_model_judges_too() -> None:
    messages = session()
    emulator = ProviderEmulator(recite)
    judge = emulator.chat_anthropic(MODEL, max_tokens=1024)
    evaluation = evaluate(messages, ForgetSecret() | Repair(), window=200_000, judge=judge, judge_probes=4)
    assert len(evaluation.judged) == 4 and len(emulator.accepted) == 8
    assert all(j.full_correct and j.view_correct == (j.matched == "held") for j in evaluation.judged)
    assert all(r.request.body["system"] for r in emulator.accepted)


@pytest.mark.parametrize("stem", ["sweagent__gpt4-pydicom-1458", "claudecode__spotter-258c7280"])
def test_on_corpus_sessions_a_reciting_judge_agrees_with_matching(stem: str) -> None:
    """On real sessions compacted at 32k, the histories as the judge reads them hold exactly what
    string matching found: each question asked at the right call, with the right histories."""
    messages = corpus_session(stem)

    def recite_prompt(prompt: str) -> str:
        found = _HISTORY.search(prompt)
        assert found is not None
        return found.group(1)

    evaluation = evaluate(messages, default_pipeline(), window=32_000, judge=recite_prompt, judge_probes=30)
    assert len(evaluation.judged) >= 20
    assert any(j.matched != "held" for j in evaluation.judged)  # the compaction lost some
    for judged in evaluation.judged:
        assert judged.full_correct, judged
        assert judged.view_correct == (judged.matched == "held"), judged
