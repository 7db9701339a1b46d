"""`PairwiseTruncate`: drop the oldest whole turns until the history fits, leaving a notice.

This module also holds `CompactionState`, shared by the two processors that compact (this one and
`Summarize`): the history at this call, seen as what earlier compactions left (the head, what they
kept, their notice or summary) and what came after. A compaction happens only when this call's
history is over the high-water mark, and goes down to the low-water mark; a processed history
carries its compactions with it (the notice, the summary and its marker), so between compactions
the view only grows by appending, in both modes (`historykit._view`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from historykit._identity_cache import IdentityCache
from historykit._messages import CompactionMarker, Message, SummaryPart
from historykit._pipeline import HistoryProcessor, ProcessContext, StepNotes, history_sums
from historykit._recall import HANDLE_LENGTH, check_recall_tool, recall_call
from historykit.processors import _final_request as final_request
from historykit.processors._summary_recall import truncation_index
from historykit.processors._trigger import Trigger, TriggerField, counted_mark
from historykit.processors._turns import (
    Unit,
    UnitKind,
    head_end,
    is_summary_message,
    notice_count,
    split_units,
    truncation_notice,
)


@dataclass
class PairwiseTruncate(TriggerField, HistoryProcessor):
    """Drops the oldest whole turns until the history fits its budget, and says so in a notice.

    Work starts when the history crosses the high-water mark and goes down to the low-water mark,
    so between two truncations the processed history only grows by appending. It always keeps the
    system messages, the first user message (the task), pinned messages (a pinned part keeps its
    whole unit), earlier summaries, and the final request; it drops a tool call only together with
    all its results (a parallel group is dropped whole). When it cuts into a turn it keeps that
    turn's user request, so the model still sees what it is working on. One user-voice notice says
    how many earlier messages were removed. When even what must be kept is over the budget, the
    notes say so: no rule is broken to fit. Only when that leaves the history over the model's
    context window, because the final request alone is that large, are the final request's largest
    tool results shortened (`fit_final_request`): otherwise the provider would reject the call.

    Example:
        ```python
        from historykit.processors import PairwiseTruncate
        from historykit.processors import Trigger

        truncate = PairwiseTruncate(trigger=Trigger(max_fraction=0.8))  # start at 80% of the window ...
        truncate = PairwiseTruncate(trigger=Trigger(max_tokens=30_000, low_water=0.5))  # ... or 30k, to 15k
        result = truncate.run(messages, context_window=32_000)
        ```
    """

    fit_final_request: bool = True
    """When the history is still over the model's context window once everything else that may go
    is gone, because the final request alone is that large (say, six parallel file reads), cut the
    middle out of its largest tool results (head and tail stay, with a line saying what was cut)
    down to the high-water mark, so the provider does not reject the call. `False`: send it as it
    is; the notes say it is over."""

    recall_tool: str | None = None
    """The name of the recall tool, when the integration installed one (`historykit._recall`): the
    truncation notice then names an index of the tool outputs it removed, which that tool returns
    (`historykit.processors._summary_recall.truncation_index`), so a value they held stays one call
    away instead of gone."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_recall_tool(self.recall_tool)

    def process(self, messages: list[Message], ctx: ProcessContext) -> tuple[list[Message], StepNotes]:
        state = CompactionState(messages, ctx, self.trigger, self.recall_tool)
        point = state.current_call()
        if state.fires(point):
            state.truncate(point)
        out, notes = state.result()
        if self.fit_final_request:
            window = counted_mark(ctx.context_window, ctx)  # in the counter's tokens
            total = state.cum[-1] if out is messages else sum(map(ctx.counter.count_message, out))
            if total > window:
                limit = min(self.trigger.high_tokens(ctx) or window, window)
                out = final_request.fit_final_request(out, ctx, limit, notes, self.recall_tool)
        return out, notes


# --- the compaction state of a call, shared with `Summarize` ---------------------------------------

Mode = Literal["truncate", "summarize"]


@dataclass(slots=True)
class Piece:
    """A unit of the region a compaction may cut: messages kept or dropped together."""

    messages: tuple[Message, ...]
    tokens: int
    kind: UnitKind
    pinned: bool
    summary: bool = False
    """A summary message: truncation keeps it, the next summary replaces it."""
    notice: int | None = None
    """For a truncation notice: how many messages it says were removed."""


def _piece(messages: tuple[Message, ...], unit: Unit, tokens: int) -> Piece:
    summary = unit.kind == "compaction" and is_summary_message(messages[0])
    notice = notice_count(messages[0]) if unit.kind == "compaction" and not summary else None
    return Piece(messages, tokens, unit.kind, unit.pinned, summary, notice)


@dataclass(slots=True)
class Point:
    """A model call recorded in the history: it saw `messages[:end]`, processed."""

    end: int
    tokens: int
    """Size of the processed history that call saw."""
    count: int
    """Messages in the processed history that call saw."""


@dataclass(slots=True)
class Cut:
    """Where a compaction cuts and what it keeps of the region before the cut."""

    unit: int
    """Index (in `CompactionState.units`) of the first unit of the kept tail."""
    start: int
    """Message index where the kept tail starts."""
    kept: list[Piece]
    """Pieces of the cut region that stay, in order: pinned units, requests, earlier summaries."""
    kept_tokens: int
    kept_count: int
    dropped: int
    """Messages of the cut region that are gone (what a truncation notice counts)."""
    covered: list[Message]
    """Messages of the cut region after the latest summary: what a new summary must cover."""
    previous_summary: Message | None
    """The latest summary in the cut region, which a new summary updates."""
    prior_notice: int
    """What the latest truncation notice in the cut region counted."""
    opener: Piece | None = None
    """The request of the turn the cut falls in, among `kept`: a summary puts it after itself."""


class _Walk:
    """Walks the region a compaction may cut, in order, tracking what a cut here would keep.

    Kept: pinned units and system messages, with the request of their turn (so an assistant
    message never ends up right after another one once the units between them are gone); the
    request of the turn the cut falls in (so the model still sees what it is working on);
    earlier summaries, when truncating. A truncation notice is replaced by the next compaction.
    """

    __slots__ = (
        "covered",
        "dropped",
        "kept",
        "kept_count",
        "kept_tokens",
        "mode",
        "opener",
        "opener_at",
        "opener_kept",
        "previous_summary",
        "prior_notice",
    )

    def __init__(self, mode: Mode) -> None:
        self.mode = mode
        self.kept: list[Piece] = []
        self.kept_tokens = 0
        self.kept_count = 0
        self.dropped = 0
        self.opener: Piece | None = None
        self.opener_at = 0
        self.opener_kept = False
        self.covered: list[Message] = []
        self.previous_summary: Message | None = None
        self.prior_notice = 0

    def _keep(self, piece: Piece, at: int | None = None) -> None:
        if at is None:
            self.kept.append(piece)
        else:
            self.kept.insert(at, piece)
        self.kept_tokens += piece.tokens
        self.kept_count += len(piece.messages)

    def add(self, piece: Piece, frozen: bool = False) -> None:
        """Move the cut past `piece`; a `frozen` piece is kept whatever it is."""
        self.covered.extend(piece.messages)
        if piece.summary:
            if self.mode == "summarize":
                # The next summary updates this one: it is replaced, and what it covered is not
                # given to the summarizer again.
                self.previous_summary = piece.messages[0]
                self.covered = []
            else:
                self._keep(piece)
            return
        if piece.notice is not None:
            self.prior_notice = piece.notice
            return
        if piece.kind == "request":
            if self.opener is not None and not self.opener_kept:
                self.dropped += len(self.opener.messages)
            self.opener, self.opener_at = piece, len(self.kept)
            self.opener_kept = piece.pinned or frozen
            if self.opener_kept:
                self._keep(piece)
            return
        if piece.pinned or piece.kind == "system":
            if self.opener is not None and not self.opener_kept:
                self._keep(self.opener, self.opener_at)
                self.opener_kept = True
            self._keep(piece)
        elif frozen:
            self._keep(piece)
        else:
            self.dropped += len(piece.messages)

    def pending_opener(self) -> Piece | None:
        """The request of the turn the cut falls in, when it is in the cut region: it stays."""
        return self.opener if self.opener is not None and not self.opener_kept else None

    def size(self) -> tuple[int, int]:
        """Tokens and messages kept by a cut here."""
        opener = self.pending_opener()
        if opener is None:
            return self.kept_tokens, self.kept_count
        return self.kept_tokens + opener.tokens, self.kept_count + len(opener.messages)

    def cut(self, unit: int, start: int) -> Cut:
        kept = list(self.kept)
        opener = self.pending_opener()
        if opener is not None:
            kept.insert(self.opener_at, opener)
        tokens, count = self.size()
        return Cut(
            unit,
            start,
            kept,
            tokens,
            count,
            self.dropped,
            list(self.covered),
            self.previous_summary,
            self.prior_notice,
            opener,
        )


def _kept_after(message: Message) -> int:
    """How many kept messages a summary message puts after itself (0 for anything else)."""
    for part in message.parts:
        if isinstance(part, SummaryPart) and part.marker is not None:
            return part.marker.kept_after
    return 0


def latest_marker(messages: Sequence[Message]) -> CompactionMarker | None:
    """The marker of the latest summary in `messages`, if it has one."""
    for msg in reversed(messages):
        for part in msg.parts:
            if isinstance(part, SummaryPart):
                return part.marker
    return None


class CompactionState:
    """A history at this call, seen as what earlier compactions left and what came after them.

    The processed history is `prefix + messages[live:]`: the prefix holds the head (system messages
    and the task), what earlier compactions kept, and their notice or summary; a processed history
    given as input starts with its compactions in the prefix already. A compaction at this call
    (`truncate`, or `apply` with a summary) makes a new prefix.
    """

    def __init__(
        self, messages: list[Message], ctx: ProcessContext, trigger: Trigger, recall_tool: str | None = None
    ) -> None:
        self.messages = messages
        self.ctx = ctx
        self.trigger = trigger
        self.recall_tool = recall_tool
        """With a recall tool, a truncation notice names the index of the tool outputs it removed."""
        self.cum = history_sums(messages, ctx)
        self.notes = StepNotes()
        self.high = trigger.high_tokens(ctx)
        """The token high-water mark (`None` for a message-count trigger)."""
        self.low = trigger.target_tokens(ctx)
        """The token low-water mark."""
        self.new_prefix: list[Message] | None = None
        """The prefix once a compaction happened at this call; `None` while the input's stands."""

    # The layout of the history (its units, what earlier compactions left) is worked out on first
    # use (`_lay_out`): most calls do not fire, and need only the sizes (`point`, `fires`, `result`).
    head: int
    units: list[Unit]
    live_unit: int
    live: int
    prefix_pieces: list[Piece]
    prefix_tokens: int
    prefix_count: int
    marker: CompactionMarker | None
    """The marker of the latest summary in the processed history."""
    offset: int
    unit_of: list[int]
    run_start: list[int]
    """`run_start[i]`: where the run of user/tool messages that ends at message `i` starts."""

    _LAID_OUT: ClassVar[frozenset[str]] = frozenset(
        {
            "head",
            "units",
            "live_unit",
            "live",
            "prefix_pieces",
            "prefix_tokens",
            "prefix_count",
            "marker",
            "offset",
            "unit_of",
            "run_start",
        }
    )

    def __getattr__(self, name: str) -> Any:
        # Only called for an attribute not set yet: the layout's, made once, on first use.
        if name not in CompactionState._LAID_OUT:
            raise AttributeError(name)
        self._lay_out()
        return self.__dict__[name]

    def _lay_out(self) -> None:
        messages = self.messages
        self.head = head_end(messages)
        self.units = split_units(messages, self.head)
        # The latest compaction already in the history (and the messages a summary keeps right
        # after itself) ends the prefix.
        self.live_unit = 0
        for index in range(len(self.units) - 1, -1, -1):
            if self.units[index].kind == "compaction":
                self.live_unit = index + 1 + self._kept_units(index)
                break
        self.live = self.start_of(self.live_unit) if self.live_unit else self.head
        self.prefix_pieces = [self._piece(u) for u in self.units[: self.live_unit]]
        self.prefix_tokens = self.cum[self.live]
        self.prefix_count = self.live
        self.marker = latest_marker(messages[: self.live])
        self.offset = self._original_offset()

        self.unit_of = [-1] * len(messages)
        for index, unit in enumerate(self.units):
            for i in range(unit.start, unit.end):
                self.unit_of[i] = index
        self.run_start = list(range(len(messages)))
        for i in range(1, len(messages)):
            if messages[i].role in ("user", "tool") and messages[i - 1].role in ("user", "tool"):
                self.run_start[i] = self.run_start[i - 1]

    def _kept_units(self, compaction: int) -> int:
        """The units a summary keeps right after itself (its marker's `kept_after` messages), when
        they are whole request units; 0 otherwise (a history edited since)."""
        unit = self.units[compaction]
        kept = _kept_after(self.messages[unit.start])
        end, count = unit.end, 0
        while kept and end - unit.end < kept:
            following = compaction + 1 + count
            if following >= len(self.units) or self.units[following].kind != "request":
                return 0
            end, count = self.units[following].end, count + 1
        return count if end - unit.end == kept else 0

    # -- where things are -------------------------------------------------------------------------

    def _piece(self, unit: Unit) -> Piece:
        msgs = tuple(self.messages[unit.start : unit.end])
        return _piece(msgs, unit, self.cum[unit.end] - self.cum[unit.start])

    def start_of(self, unit: int) -> int:
        return self.units[unit].start if unit < len(self.units) else len(self.messages)

    def unit_at(self, index: int) -> int:
        """Index of the unit that starts at message `index` (`len(units)` at the end)."""
        return self.unit_of[index] if index < len(self.messages) else len(self.units)

    def _original_offset(self) -> int:
        """Index in the original (unprocessed) history minus index in the input, past the prefix.

        Marker ranges are original indices, so a persistent run and a view-only run of the same
        conversation record the same ranges. The latest summary's marker says where its range
        ends; after it come kept messages and at most one notice counting what it removed.
        """
        summary_at: int | None = None
        notice = 0
        for index in range(self.live - 1, self.head - 1, -1):
            msg = self.messages[index]
            if is_summary_message(msg):
                summary_at = index
                break
            count = notice_count(msg)
            if count is not None and not notice:
                notice = count
        if summary_at is None:
            base = first = self.head
        else:
            marker = latest_marker([self.messages[summary_at]])
            if marker is None:
                return 0
            # The messages it keeps after itself come from before the span it covers.
            base, first = marker.covered_to, summary_at + 1 + marker.kept_after
        kept = sum(1 for m in self.messages[first : self.live] if notice_count(m) is None)
        return base + kept + notice - self.live

    def original_index(self, index: int) -> int:
        return index + self.offset

    def current_call(self) -> Point:
        """The call about to be made: it sees the whole history."""
        return self.point(len(self.messages))

    def point(self, end: int) -> Point:
        """The call that saw `messages[:end]`, in the current state."""
        if "live" not in self.__dict__:
            # Not laid out, so no compaction yet: the prefix is the input's own (its tokens
            # `cum[live]`, its messages `live`), and the call saw `messages[:end]` as they are.
            return Point(end, self.cum[end], end)
        return Point(
            end, self.prefix_tokens + self.cum[end] - self.cum[self.live], self.prefix_count + end - self.live
        )

    def fires(self, point: Point) -> bool:
        if self.high is not None and point.tokens > self.high:
            return True
        limit = self.trigger.max_messages
        return limit is not None and point.count > limit

    def last_cut_unit(self, point: Point) -> int:
        """The furthest a cut at `point` may go: the unit holding that call's final request."""
        last = point.end - 1
        if last < self.head:
            return self.live_unit
        if self.messages[last].role in ("user", "tool"):
            last = self.run_start[last]
        if last < self.head:
            return self.live_unit
        return max(self.unit_of[last], self.live_unit)

    def walk(self, mode: Mode) -> _Walk:
        """A walk positioned at the start of the live region, the prefix pieces behind it."""
        walk = _Walk(mode)
        last_summary = max((i for i, p in enumerate(self.prefix_pieces) if p.summary), default=-1)
        for index, piece in enumerate(self.prefix_pieces):
            # Truncation leaves what comes before the latest summary to that summary.
            walk.add(piece, frozen=mode == "truncate" and index < last_summary)
        return walk

    def advance(self, walk: _Walk, unit: int) -> None:
        walk.add(self._piece(self.units[unit]))

    def tokens_after(self, walk: _Walk, point: Point, unit: int, compaction_tokens: int) -> tuple[int, int]:
        """Tokens and messages of the call at `point` with the cut at `unit` and a compaction message."""
        kept_tokens, kept_count = walk.size()
        start = self.start_of(unit)
        tokens = self.cum[self.head] + kept_tokens + compaction_tokens + self.cum[point.end] - self.cum[start]
        return tokens, self.head + kept_count + 1 + point.end - start

    # -- compactions ------------------------------------------------------------------------------

    def truncation_cut(self, point: Point) -> Cut | None:
        """The cut a truncation at `point` makes: the oldest units go until the size is at the
        low-water mark or only what must stay is left; `None` when nothing can go."""
        last = self.last_cut_unit(point)
        if last <= self.live_unit:
            return None
        walk = self.walk("truncate")
        notice_tokens = _NoticeTokens(self.ctx, self.recall_tool)
        for unit in range(self.live_unit + 1, last + 1):
            self.advance(walk, unit - 1)
            removed = walk.prior_notice + walk.dropped
            tokens, count = self.tokens_after(walk, point, unit, notice_tokens(removed))
            if self.trigger.satisfied(tokens, count, self.ctx):
                return walk.cut(unit, self.start_of(unit))
            if unit == last:
                # As far as it may go: worth it only if it frees something (a notice costs tokens too).
                # Fewer messages for the same tokens counts only when the message count is what fired.
                over_count = self.trigger.max_messages is not None and point.count > self.trigger.max_messages
                frees = tokens < point.tokens or (
                    over_count and tokens == point.tokens and count < point.count
                )
                return walk.cut(unit, self.start_of(unit)) if frees else None
        return None  # pragma: no cover - the loop always returns at `last`

    def truncate(self, point: Point, why: str = "") -> bool:
        """Truncate at `point`; False (and a note) when nothing can be dropped."""
        cut = self.truncation_cut(point)
        if cut is None or cut.dropped == 0:
            if point.end == len(self.messages):
                self.notes.details.append(
                    f"{why}nothing can be dropped without losing the system prompt, the task, pinned "
                    "content or the final request"
                )
            return False
        before = point.tokens
        call = None
        if self.recall_tool is not None:
            kept = {id(m) for piece in cut.kept for m in piece.messages}
            removed = [m for m in self.messages[self.head : cut.start] if id(m) not in kept]
            index = truncation_index(removed, self.recall_tool)
            if index is not None:
                self.notes.originals[index[0]] = index[1]
                call = recall_call(self.recall_tool, index[0])
        self.apply(cut, truncation_notice(cut.prior_notice + cut.dropped, call))
        after = self.point(point.end).tokens
        if point.end == len(self.messages):
            self.notes.markers.append(
                CompactionMarker(
                    covered_from=self.head,
                    covered_to=self.original_index(cut.start),
                    tokens_before=before,
                    tokens_after=after,
                    strategy="truncate",
                )
            )
        self.notes.details.append(
            f"{why}removed {cut.dropped} message(s) before message {point.end}: "
            f"{before:,} -> {after:,} tokens"
        )
        return True

    def apply(self, cut: Cut, compaction: Message) -> None:
        """Make `cut` the state: the prefix becomes head + kept pieces + `compaction`; a summary
        goes before the request of the turn the cut falls in (its marker's `kept_after`), so the
        model reads the summary and then what it is working on."""
        tokens = self.ctx.counter.count_message(compaction)
        unit = split_units([compaction])[0]
        written = _piece((compaction,), unit, tokens)
        after = [cut.opener] if cut.opener is not None and _kept_after(compaction) else []
        before = [p for p in cut.kept if not any(p is a for a in after)]
        self.prefix_pieces = [*before, written, *after]
        self.new_prefix = [
            *self.messages[: self.head],
            *(m for p in self.prefix_pieces for m in p.messages),
        ]
        self.prefix_tokens = self.cum[self.head] + cut.kept_tokens + tokens
        self.prefix_count = len(self.new_prefix)
        self.live_unit = cut.unit
        self.live = cut.start
        for part in compaction.parts:
            if isinstance(part, SummaryPart):
                self.marker = part.marker

    def result(self) -> tuple[list[Message], StepNotes]:
        """The processed history (the input list itself when nothing changed) and the notes."""
        notes = self.notes
        final = self.point(len(self.messages))
        if self.fires(final):
            notes.details.append(
                f"still over budget: {final.tokens:,} tokens in {final.count} messages; what is left is the "
                "system prompt, the task, pinned content, kept requests and summaries, and the final request"
            )
        if self.new_prefix is None:
            return self.messages, notes
        out = [*self.new_prefix, *self.messages[self.live :]]
        before = {id(m) for m in self.messages}
        after = {id(m) for m in out}
        notes.removed = sum(1 for m in self.messages if id(m) not in after)
        notes.added = sum(1 for m in out if id(m) not in before)
        return out, notes


class _NoticeTokens:
    """Tokens of the notice for a count: the count changes as a cut moves, the text barely does."""

    _cache: ClassVar[IdentityCache[int]] = IdentityCache()
    """Per tokenizer (its identity) and count, shared by every truncation."""

    def __init__(self, ctx: ProcessContext, recall_tool: str | None = None) -> None:
        self._counter = ctx.counter
        self._policy = ctx.cache_policy
        # The index call's handle changes with what is removed; its length does not.
        self._call = recall_call(recall_tool, "0" * HANDLE_LENGTH) if recall_tool is not None else None

    def __call__(self, count: int) -> int:
        tokenizer = self._counter.tokenizer
        tokens = self._cache.get(tokenizer, (count, self._call))
        if tokens is None:
            tokens = self._counter.count_message(truncation_notice(count, self._call))
            self._cache.put(tokenizer, tokens, self._policy, (count, self._call))
        return tokens
