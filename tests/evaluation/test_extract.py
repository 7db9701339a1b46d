"""Probe extraction: the probes of hand-built transcripts are the ones the rules say, and on every
corpus session extraction is deterministic and every answer is in the transcript where it says."""

from __future__ import annotations

from collections import Counter

from historykit._messages import Message, ToolCallPart, ToolResultPart
from historykit.evaluation import KINDS, Probe, extract_probes, message_text, normalise
from tests.evaluation.transcripts import ERROR, SECRET, session


def of_kind(probes: list[Probe], kind: str) -> list[Probe]:
    return [p for p in probes if p.kind == kind]


def test_recall_is_a_value_a_tool_gave_that_the_agent_used() -> None:
    probes = of_kind(extract_probes(session()), "recall")
    answers = {p.needles[0]: p for p in probes}
    assert SECRET in answers
    assert answers[SECRET].appeared == 3  # the Grep result, not the Read call that used it
    # The agent's own inventions (a path it wrote first) and values nobody used are no probes.
    assert "app/boot.py" not in answers
    assert "tests/test_boot.py" not in answers


def test_a_value_the_agent_named_first_is_no_recall_probe() -> None:
    messages = [
        Message.user("go"),
        Message.assistant("", [ToolCallPart("a", "Read", {"file_path": "src/main_module.py"})]),
        Message("tool", (ToolResultPart("a", "Read", "src/main_module.py: 3 lines"),)),
        Message.assistant("", [ToolCallPart("b", "Read", {"file_path": "src/main_module.py"})]),
    ]
    assert of_kind(extract_probes(messages), "recall") == []


def test_artifacts_follow_the_latest_change_of_each_file() -> None:
    probes = of_kind(extract_probes(session()), "artifacts")
    assert [(p.needles, p.appeared, p.until) for p in probes] == [
        (("app/boot.py", "URL = os.environ['X']"), 6, 8),
        (("app/boot.py", "URL = settings.get('database_url')"), 8, None),
    ]


def test_a_failed_write_is_no_artifact() -> None:
    messages = [
        Message.user("go"),
        Message.assistant(
            "", [ToolCallPart("a", "Write", {"file_path": "x.py", "content": "print('hello world')"})]
        ),
        Message("tool", (ToolResultPart("a", "Write", "permission denied", is_error=True),)),
        Message.assistant("I could not write it."),
    ]
    assert of_kind(extract_probes(messages), "artifacts") == []


def test_continuation_is_the_current_request_and_the_open_plan_items() -> None:
    todos = [
        {"content": "Find the crash", "status": "completed"},
        {"content": "Fix the settings loader", "status": "in_progress"},
        {"content": "Run the whole suite", "status": "pending"},
    ]
    messages = [
        Message.user("Fix the crash."),
        Message.assistant("", [ToolCallPart("t1", "TodoWrite", {"todos": todos})]),
        Message("tool", (ToolResultPart("t1", "TodoWrite", "ok"),)),
        Message.assistant("Working on it."),
        Message.user("Also update the changelog."),
        Message.assistant("", [ToolCallPart("t2", "TodoWrite", {"todos": todos[1:2]})]),
        Message("tool", (ToolResultPart("t2", "TodoWrite", "ok"),)),
        Message.assistant("Next."),
    ]
    probes = of_kind(extract_probes(messages), "continuation")
    assert [(p.needles[0], p.appeared, p.until) for p in probes] == [
        ("Fix the crash.", 0, 4),
        ("Fix the settings loader", 1, 5),
        ("Run the whole suite", 1, 5),
        ("Also update the changelog.", 4, None),
        ("Fix the settings loader", 5, None),
    ]
    # The request is scored at the calls between it and the next one, not after.
    first = probes[0]
    assert [first.active_at(point) for point in (1, 3, 4, 5)] == [True, True, True, False]


def test_decisions_pair_an_error_with_what_the_agent_did_next() -> None:
    probes = of_kind(extract_probes(session()), "decisions")
    assert [(p.needles, p.source, p.appeared) for p in probes] == [
        ((ERROR, "grep -n database_url config"), 11, 12)
    ]


def test_extraction_is_deterministic_and_its_answers_are_in_the_transcript(
    corpus_session: list[Message],
) -> None:
    probes = extract_probes(corpus_session)
    assert probes == extract_probes(list(corpus_session))
    kinds = Counter(p.kind for p in probes)
    assert set(kinds) <= set(KINDS)
    assert kinds["continuation"] >= 1  # every session has a task
    texts = [normalise(message_text(m)) for m in corpus_session]
    for probe in probes:
        assert probe.source <= probe.appeared < len(corpus_session)
        assert probe.until is None or probe.until > probe.appeared
        known = " ".join(texts[: probe.appeared + 1])
        for needle in probe.needles:
            assert normalise(needle) in known, (probe, needle)


def test_only_what_reads_as_an_error_is_a_decision() -> None:
    write = ToolCallPart("w", "Write", {"file_path": "a.ex", "content": 'json(%{error: "id is required"})'})
    edit = ToolCallPart("e", "str_replace_editor", {"command": "str_replace", "path": "a.ex"})
    messages = [
        Message.user("go"),
        Message.assistant("", [write]),
        # An edit's echo of the file quotes `error:` in code: no error.
        Message(
            "tool", (ToolResultPart("w", "Write", 'Updated:\n    48→  json(%{error: "id is required"})'),)
        ),
        Message.assistant("", [edit]),
        # A bare heading gives way to the line that says what went wrong.
        Message(
            "tool", (ToolResultPart("e", "str_replace_editor", "ERROR:\nParameter `old_str` is required."),)
        ),
        Message.assistant("I need to pass old_str."),
    ]
    probes = of_kind(extract_probes(messages), "decisions")
    assert [(p.needles, p.source) for p in probes] == [
        (("Parameter `old_str` is required.", "I need to pass old_str."), 4)
    ]


def test_a_copy_changes_its_destination_only() -> None:
    backup = ToolCallPart("b", "bash", {"command": "cd /testbed && cp pkg/core.py pkg/core.py.bak"})
    restore = ToolCallPart("r", "bash", {"command": "cp pkg/core.py.bak pkg/core.py"})
    messages = [
        Message.user("go"),
        Message.assistant("", [backup]),
        Message("tool", (ToolResultPart("b", "bash", ""),)),
        Message.assistant("", [restore]),
        Message("tool", (ToolResultPart("r", "bash", ""),)),
        Message.assistant("Restored."),
    ]
    probes = of_kind(extract_probes(messages), "artifacts")
    assert [(p.needles[0], p.appeared) for p in probes] == [("pkg/core.py.bak", 1), ("pkg/core.py", 3)]
