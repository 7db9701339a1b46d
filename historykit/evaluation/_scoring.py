"""Scoring the views a strategy sent against a transcript's probes, call by call.

At each call, a probe is **scored** when it is active (`Probe.active_at`) and the full history the
call had (the raw transcript from the latest compaction the agent made itself) holds it: what the
agent's own run had already lost is nobody's loss here, so the full-context baseline scores 100%
by construction and every score is against it. A scored probe **holds** when each of its needles is
in the view sent (normalised: `historykit.evaluation._matching`); else it is **recoverable** when
each needle missing from the view is in an original that a recall handle the view names returns
(`historykit.Recall`: the handles of the transcript's tool outputs, as a store's log keeps them);
else it is **lost**. The texts a pipeline wrote that a handle returns (a summary's index of the
outputs its recall section had no room for: `PipelineResult.originals`) are originals too, given
with `add_written`; the handles such a text names are followed in turn.

Each message's needles are found once: views share their messages from call to call (persistent
processing hands the same objects on), so a replay costs about one pass over the messages it made.

Example:
    ```python
    from historykit.evaluation import ViewScorer, extract_probes

    scorer = ViewScorer(messages, extract_probes(messages))
    for call, point in enumerate(points, start=1):
        score = scorer.score(call, point, views[call - 1])
    score.held["recall"], score.scored["recall"]
    ```
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from historykit._messages import Message, ToolResultPart
from historykit._recall import content_handle
from historykit._tokens import TokenCounter
from historykit.evaluation._cost import cached_prefix, call_cost
from historykit.evaluation._matching import handles_named, message_text, normalise
from historykit.evaluation._probes import KINDS, Probe, ProbeKind


@dataclass(frozen=True)
class CallScore:
    """One call: what it sent, what that cost, and how its probes fared."""

    call: int
    """1-based number of the model call."""
    point: int
    """Index of the assistant message answering it: its input is `messages[:point]`, processed."""
    tokens: int
    """Input tokens sent."""
    reused: int
    """Of those, the tokens identical to the previous call's input from its start (cache hits)."""
    cost: float
    """`historykit.evaluation.call_cost(tokens, reused)`."""
    scored: dict[ProbeKind, int]
    """Per kind, the probes scored at this call (active, and held by the call's full history)."""
    held: dict[ProbeKind, int]
    """Per kind, the scored probes whose answer is in the view."""
    recoverable: dict[ProbeKind, int]
    """Per kind, the scored probes not in the view that a recall handle it names returns."""
    lost: tuple[int, ...] = ()
    """Indices (into the probe list) of the scored probes neither held nor recoverable."""

    def share(self, kind: ProbeKind) -> float | None:
        """Held or recoverable, over scored, for `kind`; `None` when no probe of it was scored."""
        scored = self.scored.get(kind, 0)
        return (self.held.get(kind, 0) + self.recoverable.get(kind, 0)) / scored if scored else None


@dataclass(frozen=True)
class KindScore:
    """One probe kind over every call of a run."""

    kind: ProbeKind
    probes: int
    """Probes of this kind extracted."""
    scored: int
    """Probe-calls scored (a probe counts once at each call that scores it)."""
    held: int
    recoverable: int
    worst: float | None
    """The lowest held-or-recoverable share at any call (`None`: never scored)."""

    @property
    def held_share(self) -> float | None:
        return self.held / self.scored if self.scored else None

    @property
    def reachable_share(self) -> float | None:
        """Held or recoverable, over scored."""
        return (self.held + self.recoverable) / self.scored if self.scored else None


def kind_scores(probes: Sequence[Probe], calls: Sequence[CallScore]) -> tuple[KindScore, ...]:
    """The per-kind totals of a run's calls."""
    out = []
    for kind in KINDS:
        shares = [s for c in calls if (s := c.share(kind)) is not None]
        out.append(
            KindScore(
                kind,
                sum(1 for p in probes if p.kind == kind),
                sum(c.scored.get(kind, 0) for c in calls),
                sum(c.held.get(kind, 0) for c in calls),
                sum(c.recoverable.get(kind, 0) for c in calls),
                min(shares) if shares else None,
            )
        )
    return tuple(out)


@dataclass
class ViewScorer:
    """Scores the views sent at the calls of one transcript against its probes (module docstring).

    Give the calls in order: each call's cached prefix is measured against the previous view.
    """

    messages: Sequence[Message]
    """The raw transcript."""
    probes: Sequence[Probe]
    counter: TokenCounter = field(default_factory=TokenCounter)
    """Counts the views' tokens when the caller does not give them."""
    _needles: list[str] = field(init=False, repr=False)
    _probe_needles: list[frozenset[int]] = field(init=False, repr=False)
    _found: dict[int, tuple[Message, frozenset[int], tuple[str, ...]]] = field(
        default_factory=dict, init=False, repr=False
    )
    _originals: dict[str, frozenset[int]] = field(default_factory=dict, init=False, repr=False)
    _links: dict[str, tuple[str, ...]] = field(default_factory=dict, init=False, repr=False)
    """Per written original (`add_written`), the handles it names."""
    _reach: dict[str, frozenset[int]] = field(default_factory=dict, init=False, repr=False)
    """Per written original, the needles it and everything it leads to hold (its text is fixed by
    its handle, so this is found once)."""
    _previous: Sequence[Message] = field(default=(), init=False, repr=False)
    last_scored: dict[int, tuple[int, str]] = field(default_factory=dict, init=False, repr=False)
    """Per probe (its index), the latest call given to `score` that scored it and the verdict there
    (`held`, `recoverable`, `lost`): where the judge mode asks about it."""

    def __post_init__(self) -> None:
        index: dict[str, int] = {}
        self._probe_needles = [
            frozenset(index.setdefault(normalise(n), len(index)) for n in p.needles) for p in self.probes
        ]
        self._needles = list(index)
        for msg in self.messages:
            for part in msg.parts:
                if isinstance(part, ToolResultPart):
                    handle = content_handle(part.content)
                    if handle not in self._originals:
                        self._originals[handle] = self._match(normalise(part.content))

    def add_written(self, originals: Mapping[str, str]) -> None:
        """Count `originals` (by handle: what a pipeline's results handed on that no tool returned,
        such as a summary's recall index) as recoverable through their handles too."""
        for handle, text in originals.items():
            if handle not in self._originals:
                self._originals[handle] = self._match(normalise(text))
                self._links[handle] = tuple(handles_named(text))

    def _reachable(self, handle: str) -> frozenset[int]:
        """The needles `handle` returns, with those of the handles a written original names, in turn."""
        if handle not in self._links:
            return self._originals.get(handle, frozenset())
        known = self._reach.get(handle)
        if known is None:
            found: set[int] = set()
            seen, todo = {handle}, [handle]
            while todo:
                current = todo.pop()
                found |= self._originals.get(current, frozenset())
                for linked in self._links.get(current, ()):
                    if linked not in seen:
                        seen.add(linked)
                        todo.append(linked)
            known = self._reach[handle] = frozenset(found)
        return known

    def _match(self, text: str) -> frozenset[int]:
        return frozenset(i for i, needle in enumerate(self._needles) if needle in text)

    def _of(self, message: Message) -> tuple[frozenset[int], tuple[str, ...]]:
        """The needles in `message` and the recall handles it names (found once per message object;
        the object is kept so its id is not reused)."""
        known = self._found.get(id(message))
        if known is None or known[0] is not message:
            text = message_text(message)
            known = (message, self._match(normalise(text)), tuple(handles_named(text)))
            self._found[id(message)] = known
        return known[1], known[2]

    def present(self, messages: Sequence[Message]) -> set[int]:
        """The needles `messages` hold between them."""
        found: set[int] = set()
        for msg in messages:
            found |= self._of(msg)[0]
        return found

    def score(
        self,
        call: int,
        point: int,
        view: Sequence[Message],
        *,
        start: int = 0,
        tokens: int | None = None,
        reused: int | None = None,
    ) -> CallScore:
        """Score the `view` sent at `call` (the call answered by message `point`).

        `start`: where the call's full history starts (the agent's own latest compaction before
        `point`). `tokens`/`reused`: the call's input tokens and cache hits when the caller measured
        them (a replay anchored on recorded usage); else the view is counted.
        """
        baseline = self.present(self.messages[start:point])
        in_view: set[int] = set()
        handles: set[str] = set()
        for msg in view:
            found, named = self._of(msg)
            in_view |= found
            handles.update(named)
        recovered: set[int] = set()
        for handle in handles:
            recovered |= self._reachable(handle)
        scored = dict.fromkeys(KINDS, 0)
        held = dict.fromkeys(KINDS, 0)
        recoverable = dict.fromkeys(KINDS, 0)
        lost: list[int] = []
        for number, (probe, needles) in enumerate(zip(self.probes, self._probe_needles)):
            if probe.source < start or not probe.active_at(point) or not needles <= baseline:
                continue
            scored[probe.kind] += 1
            if needles <= in_view:
                held[probe.kind] += 1
                verdict = "held"
            elif needles <= in_view | recovered:
                recoverable[probe.kind] += 1
                verdict = "recoverable"
            else:
                lost.append(number)
                verdict = "lost"
            self.last_scored[number] = (call, verdict)
        if tokens is None:
            tokens = sum(self.counter.count_message(m) for m in view)
        if reused is None:
            reused = cached_prefix(self._previous, view, self.counter)
        self._previous = view
        return CallScore(
            call, point, tokens, reused, call_cost(tokens, reused), scored, held, recoverable, tuple(lost)
        )
