"""Where a transcript's tokens go, and what a pipeline would save on it, call by call.

`analyze(messages, window=...)` looks at a neutral history (any transcript format reads into one:
`historykit.formats.read_transcript`) and reports:

- the estimated tokens by kind (system, user, assistant text, thinking, tool calls, tool results)
  and by tool (results and call arguments separately);
- the largest tool outputs, and the files read more than once (recognised as
  `DedupeFileReads` recognises them);
- a **replay**: the session is replayed model call by model call under the context window, as the
  agent would have run with the pipeline in persistent mode. Call `t` sees every message before the
  `t`-th assistant message; its input is the processed history of call `t - 1` plus the messages
  that came since, run through the pipeline. The replay gives the context size of each call before
  (the raw history) and after processing, the share of each input that repeats the previous call's
  input from its start (what a provider's prompt cache reuses), and per processor how often it
  acted and how many tokens it freed when it did.

What the transcript itself records is used beside the replay: the usage the provider reported
for each call (Claude Code's `message.usage`, Codex's token-count events; `Message.usage`) is shown
next to the replayed sizes, and the agent's own compactions (`boundaries`: Claude Code's compact
summary, Codex's `compacted` row; `historykit.formats.compaction_boundaries`) start a new context in
the replay, as they did in the real run. A transcript does not hold the system prompt or the tool
definitions the agent sent with every call: the replay cannot count them, and says so; the
recorded usage includes them.

The command `historykit analyze` prints this; in Jupyter an `Analysis` renders as HTML tables, and
`Analysis.plot()` draws the context size per call before and after.

Example:
    ```python
    from historykit.analysis import analyze
    from historykit.formats import read_transcript

    transcript = read_transcript("session.jsonl")
    analysis = analyze(transcript.messages, window=32_000, name=transcript.path.name)
    analysis.repeated_reads                                      # files read more than once
    analysis.replay.sent_after / analysis.replay.sent_before    # share of input tokens still sent
    analysis.to_dict()                                           # JSON-ready
    ```
"""

from __future__ import annotations

import html
import posixpath
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from historykit.errors import ArgumentTypeError, InvalidArgumentError
from historykit.messages import Message, ToolCallPart, ToolResultPart
from historykit.pipeline import HistoryProcessor, Pipeline
from historykit.tokens import TokenCounter

__all__ = [
    "KIND_LABELS",
    "Analysis",
    "CallSize",
    "ProcessorSavings",
    "RepeatedRead",
    "Replay",
    "ToolOutput",
    "analyze",
    "replay",
]

KIND_LABELS: dict[str, str] = {
    "system": "system",
    "user": "user",
    "assistant_text": "assistant text",
    "thinking": "thinking",
    "tool_call": "tool calls",
    "tool_result": "tool results",
    "media": "media",
    "summary": "summaries",
    "other": "other parts",
    "overhead": "message framing",
}
"""The token kinds of `TokenCounter.breakdown`, in the order reports show them, with their labels."""


@dataclass(frozen=True)
class ToolOutput:
    """One tool result, for the list of the largest."""

    index: int
    """Index of the message that holds it."""
    tool: str
    call: str
    """The call that produced it, with its key arguments (`Read(file_path='a.py')`)."""
    tokens: int


@dataclass(frozen=True)
class RepeatedRead:
    """A file the session read more than once."""

    path: str
    reads: int
    tokens: int
    """Tokens of all its reads' results together."""
    extents: tuple[str, ...]
    """What each read covered (`whole`, `lines 10-40`), in order."""


@dataclass(frozen=True)
class ProcessorSavings:
    """What one processor of the pipeline did over a replay."""

    processor: str
    calls: int
    """Model calls at which it changed the history."""
    tokens_freed: int
    """Tokens it took out of the history when it acted, summed over those calls."""
    replaced: int
    removed: int
    added: int
    markers: int
    """Compaction markers it wrote."""


@dataclass(frozen=True)
class CallSize:
    """The input of one model call."""

    call: int
    """1-based number of the model call."""
    before: int
    """Tokens of the raw history the call would have sent."""
    after: int
    """Tokens after the pipeline (the history carried forward from the call before)."""
    reused: int
    """Tokens at the start of the input identical to the previous call's input (a cache hit)."""
    recorded: int | None = None
    """Input tokens the provider reported for this call in the transcript (`None`: not recorded)."""


@dataclass(frozen=True)
class Replay:
    """The session replayed call by call under a window, with the pipeline in persistent mode."""

    window: int
    pipeline: str
    calls: tuple[CallSize, ...]
    processors: tuple[ProcessorSavings, ...]
    violations: tuple[str, ...]
    """Provider-rule violations of the final processed history (`historykit.check`)."""
    boundaries: tuple[int, ...] = ()
    """Indices of the messages where the agent's own compaction started a new context."""

    @property
    def recorded_calls(self) -> tuple[CallSize, ...]:
        """The calls whose input the transcript records."""
        return tuple(c for c in self.calls if c.recorded is not None)

    @property
    def sent_recorded(self) -> int:
        return sum(c.recorded or 0 for c in self.calls)

    @property
    def peak_recorded(self) -> int:
        return max((c.recorded or 0 for c in self.calls), default=0)

    @property
    def over_window_recorded(self) -> int:
        return sum(1 for c in self.calls if c.recorded is not None and c.recorded > self.window)

    @property
    def unseen_estimate(self) -> int | None:
        """Recorded minus replayed input at the first recorded call: about the size of what the
        transcript does not hold (system prompt, tool definitions), give or take the tokenizer."""
        first = next(iter(self.recorded_calls), None)
        return None if first is None or first.recorded is None else first.recorded - first.before

    @property
    def sent_before(self) -> int:
        return sum(c.before for c in self.calls)

    @property
    def sent_after(self) -> int:
        return sum(c.after for c in self.calls)

    @property
    def peak_before(self) -> int:
        return max((c.before for c in self.calls), default=0)

    @property
    def peak_after(self) -> int:
        return max((c.after for c in self.calls), default=0)

    @property
    def over_window_before(self) -> int:
        return sum(1 for c in self.calls if c.before > self.window)

    @property
    def over_window_after(self) -> int:
        return sum(1 for c in self.calls if c.after > self.window)

    @property
    def reused_share(self) -> float:
        """Share of the processed input tokens that repeat the previous call's input from its start."""
        total = self.sent_after
        return sum(c.reused for c in self.calls) / total if total else 0.0

    @property
    def compactions(self) -> int:
        return sum(p.markers for p in self.processors)


@dataclass(frozen=True)
class Analysis:
    """Where a transcript's tokens go, and what the pipeline would save on it."""

    name: str
    format: str
    messages: int
    model_calls: int
    """Assistant messages: each is the answer to one model call."""
    tokenizer: str
    total_tokens: int
    by_kind: dict[str, int]
    tool_results: dict[str, int]
    """Tokens of tool results, by tool, largest first."""
    tool_calls: dict[str, int]
    """Tokens of tool-call arguments, by tool, largest first."""
    largest_outputs: tuple[ToolOutput, ...]
    repeated_reads: tuple[RepeatedRead, ...]
    root: str | None = None
    """The directory the paths shown are relative to (every file the session touched is under it)."""
    replay: Replay | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: what `historykit analyze --json` prints."""
        out = asdict(self)
        if self.replay is not None:
            r = self.replay
            out["replay"]["summary"] = {
                "sent_before": r.sent_before,
                "sent_after": r.sent_after,
                "peak_before": r.peak_before,
                "peak_after": r.peak_after,
                "over_window_before": r.over_window_before,
                "over_window_after": r.over_window_after,
                "reused_share": round(r.reused_share, 4),
                "compactions": r.compactions,
                "agent_compactions": len(r.boundaries),
                "not_in_transcript": ["system prompt", "tool definitions"],
            }
            if r.recorded_calls:
                out["replay"]["summary"]["recorded"] = {
                    "calls": len(r.recorded_calls),
                    "sent": r.sent_recorded,
                    "peak": r.peak_recorded,
                    "over_window": r.over_window_recorded,
                    "unseen_estimate": r.unseen_estimate,
                }
        return out

    # -- rendering ------------------------------------------------------------------------------

    def _tables(self) -> list[tuple[str, tuple[str, ...], list[tuple[str, ...]]]]:
        """(title, headers, rows) of every table, shared by the terminal and the HTML rendering."""
        total = self.total_tokens or 1
        tables: list[tuple[str, tuple[str, ...], list[tuple[str, ...]]]] = []
        kinds = [(k, self.by_kind[k]) for k in KIND_LABELS if self.by_kind.get(k)]
        tables.append(
            (
                f"{self.name}: {self.messages} messages, {self.model_calls} model calls, "
                f"{self.total_tokens:,} tokens ({self.format}; tokenizer {self.tokenizer})",
                ("where the tokens go", "tokens", "share"),
                [(KIND_LABELS[k], f"{v:,}", f"{v / total:.1%}") for k, v in kinds],
            )
        )
        if self.tool_results or self.tool_calls:
            tools = sorted(
                set(self.tool_results) | set(self.tool_calls),
                key=lambda t: -(self.tool_results.get(t, 0) + self.tool_calls.get(t, 0)),
            )
            tables.append(
                (
                    "by tool",
                    ("tool", "result tokens", "argument tokens", "share"),
                    [
                        (
                            t,
                            f"{self.tool_results.get(t, 0):,}",
                            f"{self.tool_calls.get(t, 0):,}",
                            f"{(self.tool_results.get(t, 0) + self.tool_calls.get(t, 0)) / total:.1%}",
                        )
                        for t in tools
                    ],
                )
            )
        if self.largest_outputs:
            tables.append(
                (
                    "largest tool outputs" + (f" (paths under {self.root})" if self.root else ""),
                    ("message", "call", "tokens"),
                    [(str(o.index), o.call, f"{o.tokens:,}") for o in self.largest_outputs],
                )
            )
        if self.repeated_reads:
            tables.append(
                (
                    "files read more than once" + (f" (under {self.root})" if self.root else ""),
                    ("file", "reads", "tokens", "what each read covered"),
                    [
                        (r.path, str(r.reads), f"{r.tokens:,}", ", ".join(r.extents))
                        for r in self.repeated_reads
                    ],
                )
            )
        if self.replay is not None and not self.replay.calls:
            tables.append(
                ("nothing to replay: the transcript has no assistant message (no model call)", (), [])
            )
        elif self.replay is not None:
            r = self.replay
            before, after = r.sent_before, r.sent_after
            saved = f"{1 - after / before:.1%}" if before else "-"
            recorded = bool(r.recorded_calls)
            headers = ("", "raw history", "processed") + (("recorded",) if recorded else ())

            def row(label: str, raw: str, processed: str, real: str = "") -> tuple[str, ...]:
                return (label, raw, processed) + ((real,) if recorded else ())

            rows = [
                row("input tokens sent, all calls", f"{before:,}", f"{after:,}", f"{r.sent_recorded:,}"),
                row("saved", "", saved),
                row("largest call", f"{r.peak_before:,}", f"{r.peak_after:,}", f"{r.peak_recorded:,}"),
                row(
                    "calls over the window",
                    str(r.over_window_before),
                    str(r.over_window_after),
                    str(r.over_window_recorded),
                ),
                row("repeats the previous call's input (cached)", "", f"{r.reused_share:.1%}"),
                row("compactions", str(len(r.boundaries)) if r.boundaries else "", str(r.compactions)),
                row("provider-rule violations at the end", "", str(len(r.violations))),
            ]
            tables.append(
                (f"replayed call by call, window {r.window:,}: pipeline {r.pipeline}", headers, rows)
            )
            tables.append((self._replay_notes(r), (), []))
            tables.append(
                (
                    "what each processor did (calls: model calls where it changed the history; "
                    "freed: tokens it took out)",
                    ("processor", "calls", "freed", "replaced", "removed", "added", "markers"),
                    [
                        (
                            p.processor,
                            str(p.calls),
                            f"{p.tokens_freed:,}",
                            str(p.replaced),
                            str(p.removed),
                            str(p.added),
                            str(p.markers),
                        )
                        for p in r.processors
                    ],
                )
            )
        return tables

    @staticmethod
    def _replay_notes(r: Replay) -> str:
        notes = [
            "The replay counts the messages only: the system prompt and the tool definitions sent with "
            "every call are not in the transcript."
        ]
        if r.recorded_calls:
            unseen = r.unseen_estimate
            notes.append(
                f"recorded: the input the provider reported for {len(r.recorded_calls)} of "
                f"{len(r.calls)} calls (it includes them"
                + (f"; about {unseen:,} tokens at the first call" if unseen and unseen > 0 else "")
                + ")."
            )
        if r.boundaries:
            notes.append(
                f"The agent compacted its own history {len(r.boundaries)} time(s): the raw history "
                "starts again at each of its summaries, as the calls after it saw."
            )
        return " ".join(notes)

    def __rich__(self) -> Any:
        from rich import box
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        rendered: list[Any] = []
        for title, headers, rows in self._tables():
            if not headers:
                rendered.append(Text(title, style="bold" if not rows and title.startswith("nothing") else ""))
                continue
            table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
            first = max((len(row[0]) for row in rows), default=0)
            for n, header in enumerate(headers):
                if n == 0:
                    # Short labels (processor and tool names) stay on one line; paths fold.
                    table.add_column(header, justify="left", overflow="fold", min_width=min(first, 24))
                elif header.startswith("what") or header == "call":
                    table.add_column(header, justify="left", overflow="fold")
                else:
                    table.add_column(header, justify="right", no_wrap=True, min_width=len(header))
            for row in rows:
                # Tool names, paths and call arguments come from the transcript: plain text, never markup.
                table.add_row(*(Text(cell) for cell in row))
            rendered += [Text(title, style="bold"), table]
        return Group(*rendered)

    def _repr_html_(self) -> str:
        parts = []
        for title, headers, rows in self._tables():
            if not headers:
                parts.append(f"<p><b>{html.escape(title)}</b></p>")
                continue
            head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
            body = "".join(
                "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows
            )
            parts.append(
                f"<p><b>{html.escape(title)}</b></p><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
            )
        return "<div>" + "".join(parts) + "</div>"

    def plot(self, ax: Any = None) -> Any:
        """Draw the context size of each call before and after processing (needs matplotlib).

        Returns the matplotlib `Axes`; makes a new figure when `ax` is `None`.
        """
        if self.replay is None:
            raise InvalidArgumentError("this analysis has no replay to plot (it was made without a pipeline)")
        if ax is None:
            try:
                import matplotlib.pyplot as plt
            except ImportError as exc:
                # Stays an ImportError: a missing optional dependency is the environment's fault, not
                # a wrong call, and callers (the CLI) report every ImportError the same way.
                raise ImportError(
                    f"plotting needs matplotlib ({exc}): pip install 'historykit[notebooks]'"
                ) from exc
            _, ax = plt.subplots(figsize=(10, 4), layout="constrained")  # room for the legend
        r = self.replay
        calls = [c.call for c in r.calls]
        ax.plot(calls, [c.before for c in r.calls], label="raw history", color="#b0b0b0")
        ax.plot(calls, [c.after for c in r.calls], label="processed", color="#1f6feb")
        if r.recorded_calls:
            ax.plot(
                [c.call for c in r.recorded_calls],
                [c.recorded for c in r.recorded_calls],
                label="recorded usage",
                color="#2da44e",
                linewidth=1,
            )
        ax.axhline(r.window, color="#d73a49", linestyle="--", linewidth=1, label=f"window {r.window:,}")
        ax.set_xlabel("model call")
        ax.set_ylabel("input tokens")
        ax.set_title(f"{self.name}\npipeline: {r.pipeline}", fontsize=9, loc="left")
        ax.yaxis.set_major_formatter(_thousands())
        ax.xaxis.set_major_locator(_whole_numbers())  # calls are counted, never 2.5
        ax.margins(x=0.01)
        # Outside the axes, so it never covers the curves (the processed one hugs the window).
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, frameon=False, fontsize=8)
        return ax


def _whole_numbers() -> Any:
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(integer=True)


def _thousands() -> Any:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda value, _pos: f"{value / 1000:,.0f}k" if value >= 1000 else f"{value:,.0f}")


def analyze(
    messages: Sequence[Message],
    *,
    window: int,
    pipeline: HistoryProcessor | None = None,
    counter: TokenCounter | None = None,
    name: str = "transcript",
    format: str = "neutral",
    top: int = 10,
    on_call: Callable[[int, int], None] | None = None,
    boundaries: Sequence[int] = (),
) -> Analysis:
    """Analyse a neutral history; with a `pipeline`, replay it call by call under `window`.

    `on_call(done, total)` is called after each replayed model call (for progress bars).
    `boundaries`: indices of the messages where the agent's own compaction started a new context
    (`historykit.formats.compaction_boundaries`); the replay starts afresh at each.
    """
    for index, msg in enumerate(messages):
        if not isinstance(msg, Message):
            raise ArgumentTypeError(f"message {index} is a {type(msg).__name__}, not a historykit Message")
    counter = counter or (pipeline.counter if isinstance(pipeline, Pipeline) else TokenCounter())
    by_kind = counter.breakdown(messages)
    accesses, root = _file_accesses(messages)
    calls_by_id: dict[str, ToolCallPart] = {}
    tool_calls: dict[str, int] = {}
    tool_results: dict[str, int] = {}
    outputs: list[ToolOutput] = []
    for index, msg in enumerate(messages):
        for part in msg.parts:
            if isinstance(part, ToolCallPart):
                calls_by_id[part.id] = part
                tool_calls[part.name] = tool_calls.get(part.name, 0) + counter.count_part(part)
            elif isinstance(part, ToolResultPart):
                call = calls_by_id.get(part.tool_call_id)
                tool = part.name or (call.name if call is not None else "(unnamed tool)")
                tokens = counter.count_part(part)
                tool_results[tool] = tool_results.get(tool, 0) + tokens
                outputs.append(ToolOutput(index, tool, _describe(call, tool, root), tokens))
    outputs.sort(key=lambda o: -o.tokens)
    analysis = Analysis(
        name=name,
        format=format,
        messages=len(messages),
        model_calls=sum(1 for m in messages if m.role == "assistant"),
        tokenizer=str(counter.tokenizer_name),
        total_tokens=sum(counter.count_message(m) for m in messages),
        by_kind=by_kind,
        tool_results=_largest_first(tool_results),
        tool_calls=_largest_first(tool_calls),
        largest_outputs=tuple(outputs[:top]),
        repeated_reads=tuple(_repeated_reads(messages, accesses, root, counter)),
        root=root,
    )
    if pipeline is None:
        return analysis
    return Analysis(
        **{
            **analysis.__dict__,
            "replay": replay(
                messages, pipeline, window=window, counter=counter, on_call=on_call, boundaries=boundaries
            ),
        }
    )


def _largest_first(tokens: dict[str, int]) -> dict[str, int]:
    return dict(sorted(tokens.items(), key=lambda kv: -kv[1]))


def _describe(call: ToolCallPart | None, tool: str, root: str | None) -> str:
    if call is None:
        return f"{tool}(?)"
    from historykit.processors.clear_tool_results import describe_call

    if root is not None and isinstance(call.arguments, dict):
        prefix = root.rstrip("/") + "/"
        shorter = {k: v.replace(prefix, "") if isinstance(v, str) else v for k, v in call.arguments.items()}
        call = replace(call, arguments=shorter)
    return describe_call(call)


def _file_accesses(messages: Sequence[Message]) -> tuple[list[tuple[ToolCallPart, Any]], str | None]:
    """Each tool call with what it did to a file, and the directory every absolute path is under."""
    from historykit.processors.file_reads import FileRead, FileWrite, file_accesses

    calls = [p for m in messages for p in m.parts if isinstance(p, ToolCallPart)]
    accesses = list(zip(calls, file_accesses(calls)))
    paths = [a.path for _, a in accesses if isinstance(a, FileRead)]
    paths += [p for _, a in accesses if isinstance(a, FileWrite) for p in a.paths]
    return accesses, _project_root([p for p in paths if p.startswith("/")])


def _project_root(paths: list[str]) -> str | None:
    """The deepest directory holding most (80%) of `paths`, when it is deeper than `/home/<user>`."""
    if not paths:
        return None
    counts: dict[str, int] = {}
    for path in set(paths):
        parent = posixpath.dirname(path)
        while parent.count("/") >= 3:  # /a/b/c at least: never "/", "/home" or "/home/user"
            counts[parent] = counts.get(parent, 0) + 1
            parent = posixpath.dirname(parent)
    needed = 0.8 * len(set(paths))
    candidates = [d for d, n in counts.items() if n >= needed]
    return max(candidates, key=lambda d: d.count("/")) if candidates else None


def _repeated_reads(
    messages: Sequence[Message],
    accesses: list[tuple[ToolCallPart, Any]],
    root: str | None,
    counter: TokenCounter,
) -> list[RepeatedRead]:
    from historykit.processors.file_reads import FileRead

    result_tokens = {
        p.tool_call_id: counter.count_part(p)
        for m in messages
        for p in m.parts
        if isinstance(p, ToolResultPart)
    }
    by_path: dict[str, list[tuple[FileRead, int]]] = {}
    for call, access in accesses:
        if isinstance(access, FileRead):
            by_path.setdefault(access.path, []).append((access, result_tokens.get(call.id, 0)))
    prefix = root.rstrip("/") + "/" if root else None
    repeated = [
        RepeatedRead(
            path.removeprefix(prefix) if prefix else path,
            len(reads),
            sum(t for _, t in reads),
            tuple(_extent(r) for r, _ in reads),
        )
        for path, reads in by_path.items()
        if len(reads) > 1
    ]
    repeated.sort(key=lambda r: (-r.reads, -r.tokens))
    return repeated


def _extent(read: Any) -> str:
    if read.window is not None:
        return str(read.window)
    if read.whole:
        return "whole"
    if read.start < 0:
        return f"last {-read.start} lines"
    if read.end is None:
        return f"from line {read.start}"
    if read.end == read.start:
        return f"line {read.start}"
    return f"lines {read.start}-{read.end}"


@dataclass
class _Tally:
    calls: int = 0
    tokens_freed: int = 0
    replaced: int = 0
    removed: int = 0
    added: int = 0
    markers: int = 0
    order: int = field(default=0)


def replay(
    messages: Sequence[Message],
    pipeline: HistoryProcessor,
    *,
    window: int,
    counter: TokenCounter | None = None,
    on_call: Callable[[int, int], None] | None = None,
    boundaries: Sequence[int] = (),
) -> Replay:
    """Replay `messages` model call by model call through `pipeline` in persistent mode.

    At each index of `boundaries` (the agent's own compactions) the context starts afresh: the calls
    after it see that message and what follows, raw and processed alike.
    """
    from historykit.validity import check_neutral

    if not isinstance(pipeline, Pipeline):
        pipeline = Pipeline([pipeline], counter=counter)
    elif counter is not None and pipeline.counter is not counter:
        pipeline = Pipeline(pipeline.processors, counter=counter)
    count = pipeline.counter.count_message
    raw_sizes = [count(m) for m in messages]
    call_points = [i for i, m in enumerate(messages) if m.role == "assistant"]
    tallies: dict[str, _Tally] = {}
    sizes: list[CallSize] = []
    carried: list[Message] = []
    previous: list[Message] = []
    consumed = 0
    raw_total = 0
    starts = sorted(set(b for b in boundaries if 0 <= b < len(messages)))
    for n, point in enumerate(call_points, start=1):
        restart = [b for b in starts if consumed <= b < point]
        if restart:
            consumed, raw_total, carried = restart[-1], 0, []
        raw_total += sum(raw_sizes[consumed:point])
        history = carried + list(messages[consumed:point])
        consumed = point
        try:
            result = pipeline.run(history, window)
        except Exception as exc:
            # Stays a plain RuntimeError: it wraps whatever the pipeline raised (a bug in a user's
            # processor as much as a historykit error, chained as its cause), and the CLI prints a
            # plain RuntimeError as its message alone.
            raise RuntimeError(f"the pipeline failed at model call {n} (message {point}): {exc}") from exc
        carried = list(result.messages)
        for step in result.report.steps:
            tally = tallies.setdefault(step.processor, _Tally(order=len(tallies)))
            if step.changed:
                tally.calls += 1
                tally.tokens_freed += max(0, step.tokens_before - step.tokens_after)
                tally.replaced += step.notes.replaced
                tally.removed += step.notes.removed
                tally.added += step.notes.added
                tally.markers += len(step.notes.markers)
        reused = 0
        for old, new in zip(previous, carried):
            if old is not new:
                break
            reused += count(new)
        previous = carried
        usage = messages[point].usage
        sizes.append(
            CallSize(
                n, raw_total, sum(count(m) for m in carried), reused, usage.input_tokens if usage else None
            )
        )
        if on_call is not None:
            on_call(n, len(call_points))
    violations = tuple(str(v) for v in check_neutral(carried)) if carried else ()
    processors = tuple(
        ProcessorSavings(name, t.calls, t.tokens_freed, t.replaced, t.removed, t.added, t.markers)
        for name, t in sorted(tallies.items(), key=lambda kv: kv[1].order)
    )
    return Replay(window, _pipeline_name(pipeline), tuple(sizes), processors, violations, tuple(starts))


def _pipeline_name(pipeline: Pipeline) -> str:
    return " | ".join(p.name for p in pipeline.processors) or "(empty)"
