"""The neutral message model every processor is written against.

A history is a list of `Message`s. A message has a `role` and an ordered tuple of parts; each part
is one of seven kinds (`text`, `thinking`, `tool_call`, `tool_result`, `media`, `summary`,
`other`). Messages and parts are frozen: a processor edits a history by building new objects with
`dataclasses.replace`, never by mutating.

Every message and part made by an adapter (`historykit.plugins`) keeps a reference to the native
object it came from (`native`) and, for messages, a private record of the parts it was made with.
That record is how an adapter tells an untouched message (returned as the very same native
object) from an edited one (rebuilt from the native one, keeping every field that was not
edited). Messages and parts a processor creates from scratch have `native=None`.

Example:
    ```python
    from dataclasses import replace
    from historykit import Message, TextPart

    msg = Message.user("Fix the failing test in tests/test_io.py")
    shorter = replace(msg, parts=(TextPart("Fix the failing test"),))
    assert not shorter.is_untouched
    ```
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, ClassVar, Literal, Union

from historykit.errors import InvalidArgumentError

Role = Literal["system", "user", "assistant", "tool"]
"""Who speaks. `tool` messages carry tool results; every other role may carry any part kind."""

PartKind = Literal["text", "thinking", "tool_call", "tool_result", "media", "summary", "other"]
"""The kind of a message part (`Message.parts_of(kind)`): one per `Part` class."""

PIN_KEY = "historykit_pinned"
"""Metadata key that marks a native message as pinned; it survives JSON serialization."""

COMPACTION_KEY = "historykit_compaction"
"""Metadata key under which a native summary message carries its `CompactionMarker.to_dict()`."""

EDIT_KEY = "historykit_edit"
"""Metadata key under which any other message a compaction wrote (a cleared copy, a truncation
notice, a message whose thinking was dropped, ...) carries its `CompactionMarker.to_dict()`: the
stores tell such messages from the originals by it. It is never sent to a model."""

PROVIDER_COMPACTION_KEY = "historykit_provider_compaction"
"""Metadata key under which a native summary message carries its `ProviderCompaction.to_dict()`."""


@dataclass(frozen=True, slots=True)
class TextPart:
    """Plain text written by the user, the system or the model."""

    text: str
    pinned: bool = False
    """Pinned content is kept verbatim by every processor."""
    native: Any = field(default=None, compare=False, repr=False)
    kind: ClassVar[Literal["text"]] = "text"


@dataclass(frozen=True, slots=True)
class ThinkingPart:
    """Model reasoning. Signed thinking must be replayed unmodified or not at all."""

    text: str
    signature: str | None = None
    """Provider signature (Anthropic) or encrypted content; `None` when unsigned."""
    id: str | None = None
    """Provider id of the reasoning item (OpenAI Responses `rs_...`)."""
    provider: str | None = None
    """Name of the provider that produced it, when the framework records it."""
    redacted: bool = False
    """Redacted thinking: the content is opaque (in `signature`) and `text` is empty."""
    pinned: bool = False
    native: Any = field(default=None, compare=False, repr=False)
    kind: ClassVar[Literal["thinking"]] = "thinking"


@dataclass(frozen=True, slots=True)
class ToolCallPart:
    """A tool call made by the model."""

    id: str
    name: str
    arguments: dict[str, Any] | str
    """Parsed arguments, or the raw string when it is not a JSON object."""
    pinned: bool = False
    native: Any = field(default=None, compare=False, repr=False)
    kind: ClassVar[Literal["tool_call"]] = "tool_call"

    def arguments_dict(self) -> dict[str, Any]:
        """The arguments as a dict; `{}` when they are a string that is not a JSON object."""
        if isinstance(self.arguments, dict):
            return self.arguments
        try:
            parsed = json.loads(self.arguments) if self.arguments else {}
        except ValueError:
            return {}
        return parsed if isinstance(parsed, dict) else {}

    def arguments_text(self) -> str:
        """The arguments as the provider receives them (a JSON string)."""
        if isinstance(self.arguments, str):
            return self.arguments
        try:
            return json.dumps(self.arguments, ensure_ascii=False, default=str)
        except RecursionError:
            # Deeper than Python's recursion limit (thousands of levels): no provider takes it either.
            raise InvalidArgumentError(
                f"the arguments of tool call {self.id!r} ({self.name}) are nested too deeply to "
                "encode as JSON"
            ) from None


@dataclass(frozen=True, slots=True)
class ToolResultPart:
    """The result of a tool call, answering `tool_call_id`."""

    tool_call_id: str
    name: str | None
    content: str
    """The result as the model reads it (non-text results are rendered as the framework does)."""
    is_error: bool = False
    pinned: bool = False
    native: Any = field(default=None, compare=False, repr=False)
    media: tuple[MediaPart | TextPart, ...] = ()
    """The images and files the result carries besides its text, in order (a screenshot a browser
    tool returned). A processor that takes one out puts a `TextPart` in its place (`ClearMedia`),
    keeping the `native` of the `MediaPart` it replaces, so the adapter knows which item it was."""
    kind: ClassVar[Literal["tool_result"]] = "tool_result"


@dataclass(frozen=True, slots=True)
class MediaPart:
    """An image, audio clip, video or document: counted, never read as text."""

    media_type: str
    """MIME type when known (`image/png`), else a coarse kind (`image`, `document`)."""
    source: str = ""
    """A URL or a short description of where the bytes are; empty for inline data."""
    size: int = 0
    """Payload size in bytes when inline, 0 when unknown or referenced by URL."""
    pinned: bool = False
    native: Any = field(default=None, compare=False, repr=False)
    digest: str = ""
    """`payload_digest` of the inline payload, which adapters fill in: two images of one type and
    size that differ only in their bytes are told apart by it. Empty for a referenced one (`source`)."""
    kind: ClassVar[Literal["media"]] = "media"


def payload_digest(payload: str | bytes) -> str:
    """A digest of a media payload's bytes (a base64 or text payload: its characters), for
    `MediaPart.digest`."""
    data = payload.encode("utf-8", "surrogatepass") if isinstance(payload, str) else bytes(payload)
    return hashlib.blake2b(data, digest_size=20).hexdigest()


@dataclass(frozen=True, slots=True)
class CompactionMarker:
    """What a compaction did: recorded on the summary it wrote and in persistent stores."""

    covered_from: int
    """Index (in the history the compaction saw) of the first message it replaced."""
    covered_to: int
    """Index one past the last message it replaced."""
    tokens_before: int
    tokens_after: int
    strategy: str
    """The processor that wrote it (`summarize`, `truncate`, ...)."""
    model: str | None = None
    """The summarizer model, `None` for the extractive summarizer."""
    created_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    automatic: bool = True
    """`False` when a user asked for the compaction explicitly."""
    focus: str | None = None
    """What the user asked a manual compaction to keep (`Pipeline.compact(focus=...)`); `None`: no focus."""
    kept_after: int = 0
    """A summary's: how many kept messages follow it before what came after the span it covers
    (the request of the turn its cut fell in: the model reads the summary, then what it is working
    on). 0 for every other marker."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict, the form adapters and stores keep it in."""
        return {
            "covered_from": self.covered_from,
            "covered_to": self.covered_to,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "strategy": self.strategy,
            "model": self.model,
            "created_at": self.created_at.isoformat(),
            "automatic": self.automatic,
            "focus": self.focus,
            "kept_after": self.kept_after,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompactionMarker:
        """Rebuild a marker from `to_dict()`'s output; raises `InvalidArgumentError` (a `ValueError`)
        naming a missing field."""
        try:
            created = data.get("created_at")
            return cls(
                covered_from=int(data["covered_from"]),
                covered_to=int(data["covered_to"]),
                tokens_before=int(data["tokens_before"]),
                tokens_after=int(data["tokens_after"]),
                strategy=str(data["strategy"]),
                model=data.get("model"),
                created_at=datetime.fromisoformat(created) if created else datetime.now(timezone.utc),
                automatic=bool(data.get("automatic", True)),
                # Markers stored before manual compaction had no focus.
                focus=data.get("focus"),
                kept_after=int(data.get("kept_after", 0)),
            )
        except KeyError as exc:
            raise InvalidArgumentError(f"compaction marker is missing the field {exc.args[0]!r}") from None


@dataclass(frozen=True, slots=True)
class ProviderCompaction:
    """A provider's own compaction of what a summary replaces: the block it returned, sent back to it.

    Anthropic's on-demand compaction returns a signed `compaction` block (its `content` is readable);
    OpenAI's `/responses/compact` an encrypted `compaction` item only OpenAI can read. The summary's
    text is what every other reader (another provider, historykit's checks and counts) sees; the
    framework glue sends this block instead, to the provider that wrote it only
    (`historykit.plugins.native_compaction`).
    """

    provider: str
    """Who wrote it and alone can read it: `"anthropic"` or `"openai"`."""
    model: str
    """The model the compaction request named."""
    block: str
    """The block or item as the provider returned it, as JSON (sent back verbatim)."""

    def block_dict(self) -> dict[str, Any]:
        """The block as a dict, ready to send."""
        value = json.loads(self.block)
        if not isinstance(value, dict):
            raise InvalidArgumentError(
                f"a provider compaction block must be a JSON object, got {self.block[:80]!r}"
            )
        return value

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict, the form adapters and stores keep it in."""
        return {"provider": self.provider, "model": self.model, "block": self.block_dict()}

    @classmethod
    def from_dict(cls, data: Any) -> ProviderCompaction | None:
        """Rebuild it from `to_dict()`'s output; `None` for anything else (unknown data stays native)."""
        if not isinstance(data, dict) or not isinstance(data.get("block"), dict):
            return None
        provider, model = data.get("provider"), data.get("model")
        if not isinstance(provider, str) or not isinstance(model, str):
            return None
        return cls(provider, model, json.dumps(data["block"], sort_keys=True))


@dataclass(frozen=True, slots=True)
class SummaryPart:
    """A compaction summary standing in for the messages it replaced."""

    text: str
    marker: CompactionMarker | None = None
    pinned: bool = False
    native: Any = field(default=None, compare=False, repr=False)
    provider_compaction: ProviderCompaction | None = None
    """The provider's own compaction of the same span, when a native backend wrote the summary
    (`historykit.plugins.native_compaction`): sent to that provider in place of `text`."""
    kind: ClassVar[Literal["summary"]] = "summary"


@dataclass(frozen=True, slots=True)
class OtherPart:
    """Anything the neutral model does not know. Processors pass it through untouched."""

    type_name: str
    """The native type (or content-block type) name, for reports."""
    text: str = ""
    """A best-effort text rendering, used only to count tokens."""
    pinned: bool = False
    native: Any = field(default=None, compare=False, repr=False)
    kind: ClassVar[Literal["other"]] = "other"


Part = Union[TextPart, ThinkingPart, ToolCallPart, ToolResultPart, MediaPart, SummaryPart, OtherPart]  # noqa: UP007
"""One part of a message; `part.kind` names which."""


@dataclass(frozen=True, slots=True)
class ReportedUsage:
    """Token usage the provider reported for one response: the ground truth for counting."""

    input_tokens: int
    """Every input token of that request, cached ones included."""
    output_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a history: a role and its ordered parts."""

    role: Role
    parts: tuple[Part, ...]
    id: str | None = None
    """The native message id, when the framework has one."""
    pinned: bool = False
    """A pinned message is kept verbatim by every processor."""
    usage: ReportedUsage | None = None
    """For assistant messages: the usage the provider reported for the request that produced it."""
    model: str | None = None
    """For assistant messages: the name of the model that produced it, when the framework records it
    (it tells whether the provider binds thinking to the history, `historykit.BINDING_MODELS`)."""
    marker: CompactionMarker | None = field(default=None, compare=False)
    """The compaction that wrote this message (set by the pipeline on every message a processor
    made, and read back from native metadata, `EDIT_KEY`); `None` for an original."""
    native: Any = field(default=None, compare=False, repr=False)
    """The native message this one was made from (`None` when a processor made it)."""
    source: tuple[Role, tuple[Part, ...], bool] | None = field(default=None, compare=False, repr=False)
    """Private to adapters: role, parts and pin state as the adapter made them."""

    @classmethod
    def from_native(cls, role: Role, parts: Sequence[Part], native: Any, **fields: Any) -> Message:
        """What adapters call: a message that remembers how it looked when it was made."""
        parts_t = tuple(parts)
        pinned = bool(fields.pop("pinned", False))
        return cls(role, parts_t, native=native, pinned=pinned, source=(role, parts_t, pinned), **fields)

    @classmethod
    def system(cls, text: str) -> Message:
        return cls("system", (TextPart(text),))

    @classmethod
    def user(cls, text: str) -> Message:
        return cls("user", (TextPart(text),))

    @classmethod
    def assistant(cls, text: str = "", tool_calls: Sequence[ToolCallPart] = ()) -> Message:
        parts: tuple[Part, ...] = ((TextPart(text),) if text else ()) + tuple(tool_calls)
        return cls("assistant", parts)

    @property
    def is_untouched(self) -> bool:
        """True when this message is exactly what an adapter made from `native`."""
        src = self.source
        return (
            src is not None
            and self.native is not None
            and src[0] == self.role
            and src[1] is self.parts
            and src[2] == self.pinned
        )

    def part_is_original(self, part: Part) -> bool:
        """True when `part` is one of the parts the adapter made (not a processor's edit)."""
        return self.source is not None and any(part is p for p in self.source[1])

    @property
    def text(self) -> str:
        """The text parts joined by newlines."""
        return "\n".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> list[ToolCallPart]:
        return [p for p in self.parts if isinstance(p, ToolCallPart)]

    @property
    def tool_results(self) -> list[ToolResultPart]:
        return [p for p in self.parts if isinstance(p, ToolResultPart)]

    def parts_of(self, kind: PartKind) -> Iterator[Part]:
        return (p for p in self.parts if p.kind == kind)
