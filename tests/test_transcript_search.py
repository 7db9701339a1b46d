"""The transcript search (`Recall(search=True)`): what it finds, how it pages, what it never shows
(another conversation, the compacted copies), its answers to bad arguments, and the durable form
(the store's hits found apart, merged with the run's own)."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from historykit import Pipeline, Recall
from historykit._conversations import ConversationState
from historykit._messages import CompactionMarker, Message, TextPart, ToolCallPart, ToolResultPart
from historykit._recall import recall_handle
from historykit._transcript_search import HITS_PER_PAGE, Hit, find, merged, render
from historykit.errors import InvalidArgumentError
from historykit.processors import ClearToolResults, Repair, Trigger
from tests.strategies import examples, neutral_histories

SERVER_LOG = "\n".join(
    ["Starting server...", "Listening on http://127.0.0.1:8731", "GET /health 200", "GET /api/users 500"]
)


def conversation() -> list[Message]:
    return [
        Message("user", (TextPart("Start the dev server and check the users endpoint."),)),
        Message("assistant", (ToolCallPart("c1", "Bash", {"command": "npm run dev"}),)),
        Message("tool", (ToolResultPart("c1", "Bash", SERVER_LOG),)),
        Message("assistant", (ToolCallPart("c2", "Read", {"file_path": "src/api/users.ts"}),)),
        Message(
            "tool", (ToolResultPart("c2", "Read", "export function users() {\n  return db.query(USERS)\n}"),)
        ),
        Message("assistant", (TextPart("The users endpoint fails with a 500."),)),
    ]


def test_it_finds_outputs_calls_and_words_newest_first() -> None:
    hits = find(conversation(), "users")
    assert [hit.what for hit in hits] == [
        "assistant",
        "output of Read(file_path='src/api/users.ts')",
        "tool call Read(file_path='src/api/users.ts')",
        "output of Bash(command='npm run dev')",
        "user",
    ]
    output = hits[3]
    assert output.lines == ((4, "GET /api/users 500"),)
    assert output.handle == recall_handle(SERVER_LOG)
    # Every word must be on the line, in any case and order.
    (port,) = find(conversation(), "LISTENING 127.0.0.1")
    assert port.lines == ((2, "Listening on http://127.0.0.1:8731"),)
    assert find(conversation(), "listening 500") == []


def test_the_answer_names_the_recall_call_and_pages() -> None:
    answer = render(find(conversation(), "users"), "users", 1, "search_history", "recall")
    assert f"        recall(handle='{recall_handle(SERVER_LOG)}') returns this output" in answer
    assert answer.endswith("[search: hits 1-5 of 5, newest first; the end]")
    many = [Message("user", (TextPart(f"note {i}: deploy to staging"),)) for i in range(25)]
    first = render(find(many, "deploy"), "deploy", 1, "search_history", None)
    assert first.startswith("- user:\n     1\tnote 24: deploy to staging")
    assert first.endswith(
        "[search: hits 1-10 of 25, newest first; search_history(query='deploy', page=2) shows the next page]"
    )
    last = render(find(many, "deploy"), "deploy", 3, "search_history", None)
    assert last.count("- user:") == 5 and last.endswith("hits 21-25 of 25, newest first; the end]")
    assert render(find(many, "deploy"), "deploy", 4, "search_history", None) == (
        "[search: 25 hits make 3 page(s); page 4 is past the end]"
    )


def test_a_part_with_many_matching_lines_shows_three_and_counts_the_rest() -> None:
    log = "\n".join(f"ERROR step {i}" for i in range(40))
    messages = [
        Message("assistant", (ToolCallPart("c1", "Bash", {"command": "make"}),)),
        Message("tool", (ToolResultPart("c1", "Bash", log),)),
    ]
    (hit,) = find(messages, "error")
    assert [n for n, _ in hit.lines] == [1, 2, 3] and hit.more == 37
    assert "(and 37 more matching line(s))" in render([hit], "error", 1, "search_history", "recall")


def test_what_a_compaction_wrote_is_not_searched() -> None:
    marker = CompactionMarker(0, 2, 100, 10, "summarize")
    summary = Message("user", (TextPart("Summary: the server listens on 8731."),), marker=marker)
    assert find([summary], "8731") == []


@pytest.mark.parametrize(
    ("query", "page", "answer"),
    [
        ("", 1, "[search: query must be one or more words, at most 200 characters; got '']"),
        ("   ", 1, "[search: query must be one or more words, at most 200 characters; got '   ']"),
        (None, 1, "[search: query must be one or more words, at most 200 characters; got a NoneType]"),
        ("port", 0, "[search: page must be a page number (1 or more), got 0]"),
        ("port", "2", "[search: page must be a page number (1 or more), got '2']"),
    ],
)
def test_bad_arguments_are_answered_not_raised(query: object, page: object, answer: str) -> None:
    assert Recall(search=True).find(query, page, history=conversation()) == answer
    assert Recall(search=True).find("absent-word", history=conversation()) == (
        "[search: no message of this conversation has a line with 'absent-word']"
    )


def test_bad_settings_are_named() -> None:
    with pytest.raises(InvalidArgumentError, match="search_name must be a tool name"):
        Recall(search=True, search_name="search history")
    with pytest.raises(InvalidArgumentError, match="two tools need two names"):
        Recall(search=True, search_name="recall")
    with pytest.raises(InvalidArgumentError, match="search must be True or False"):
        Recall(search="yes")  # type: ignore[arg-type]


def test_persistent_mode_searches_the_originals_kept_for_recall() -> None:
    """The compacted history holds a placeholder; the original kept for recall is searched."""
    pipeline = Pipeline(
        [
            ClearToolResults(
                keep=0,
                min_tokens=1,
                min_gain=0,
                rewrite_ratio=0,  # this short history's outputs would not pay for the cache rewrite
                trigger=Trigger(max_tokens=10),
                recall_tool="recall",
            ),
            Repair(),
        ]
    )
    result = pipeline.run(conversation(), context_window=100_000)
    assert not find(result.messages, "8731")  # the view no longer has it
    state = ConversationState("c1")
    Recall().keep(state, result.originals)
    answer = Recall(search=True).find("8731", state=state, history=result.messages)
    assert "Listening on http://127.0.0.1:8731" in answer
    assert f"recall(handle='{recall_handle(SERVER_LOG)}')" in answer


def test_the_stores_hits_merge_with_the_runs_own_once() -> None:
    """A durable unit finds the store's hits apart (`stored_hits`); the tool merges them with the
    run's history, a part found in both shown once."""
    history = conversation()
    stored = find(history[:3], "users")  # the store has the first turn only
    again = [Hit.from_json(hit.to_json()) for hit in stored]
    assert again == stored
    answer = Recall(search=True).find_with("users", 1, again, history=history)
    assert answer.count("output of Bash(command='npm run dev')") == 1
    assert answer.endswith("[search: hits 1-5 of 5, newest first; the end]")
    with pytest.raises(InvalidArgumentError, match="not a search hit"):
        Hit.from_json(["x", [[1]], 0, None])


@settings(max_examples=examples(60), deadline=None, suppress_health_check=list(HealthCheck))
@given(neutral_histories(max_turns=4, max_steps=4), st.data())
def test_every_hit_is_a_line_the_history_has_with_every_word(
    history: list[Message], data: st.DataObject
) -> None:
    words = re.findall(r"\w{3,}", " ".join(m.text for m in history)) or ["absent"]
    query = " ".join(data.draw(st.lists(st.sampled_from(words), min_size=1, max_size=2)))
    hits = find(history, query)
    texts = [
        text.split("\n")
        for m in history
        if m.marker is None
        for p in m.parts
        for text in (getattr(p, "text", None), getattr(p, "content", None))
        if isinstance(text, str)
    ]
    for hit in hits:
        if hit.what.startswith("tool call "):
            continue  # the call's name and arguments as JSON, one line
        for number, shown_line in hit.lines:
            line = next(
                lines[number - 1].strip()
                for lines in texts
                if len(lines) >= number and lines[number - 1].strip().startswith(shown_line.rstrip("…"))
            )
            assert all(word.casefold() in line.casefold() for word in query.split())
    assert merged(hits, hits) == merged(hits)  # the same part twice is one hit
    pages = -(-len(hits) // HITS_PER_PAGE) or 1
    rendered = [render(hits, query, page, "search_history", "recall") for page in range(1, pages + 1)]
    shown_hits = sum(
        len(re.findall(r"^- (?:user|assistant|tool call .*|output of .*):$", block, re.M))
        for block in rendered
    )
    assert shown_hits >= len(hits)
