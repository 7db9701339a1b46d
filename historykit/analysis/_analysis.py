"""The analysis of a transcript and its replay under a pipeline (`historykit.analysis`)."""

from __future__ import annotations

import html
import posixpath
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from historykit._messages import Message, ToolCallPart, ToolResultPart
from historykit._pipeline import HistoryProcessor, Pipeline
from historykit._tokens import TokenCount, TokenCounter
from historykit.errors import ArgumentTypeError, InvalidArgumentError
from historykit.formats._recorded import (
    ALWAYS_UNSEEN,
    PARENT_CONVERSATION,
    compaction_boundaries,
    transcript_model,
    transcript_window,
    unseen_inputs,
)

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
    """The input of one model call.

    `before` and `after` are anchored on the usage the transcript recorded for the call before (its
    input and output tokens stand for everything up to its answer, what the transcript does not hold
    included, as `TokenCounter.count` counts); only the messages since are estimated. Without
    recorded usage they are the estimate of the messages alone, as `estimated_before` and
    `estimated_after` always are.
    """

    call: int
    """1-based number of the model call."""
    before: int
    """Input tokens of the raw history the call would have sent."""
    after: int
    """Input tokens after the pipeline: `before` less what the pipeline took out of the messages."""
    reused: int
    """Tokens at the start of the input identical to the previous call's input (a cache hit): the
    messages' shared prefix (estimated), plus, from the second call on, what an anchored count holds
    beyond the messages (the system prompt and tool definitions, the same at every call)."""
    recorded: int | None = None
    """Input tokens the provider reported for this call in the transcript (`None`: not recorded)."""
    estimated_before: int = 0
    """The raw history's messages alone, estimated by the tokenizer."""
    estimated_after: int = 0
    """The processed history's messages alone, estimated by the tokenizer."""
    anchor: int | None = None
    """Index of the message whose recorded usage `before` is anchored on (`None`: none was)."""


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
    window_source: str = "explicit"
    """Where `window` came from: `explicit`, `transcript` (the log records it), `genai-prices` (the
    transcript's model) or `default` (historykit's default window)."""
    model: str | None = None
    """The model the transcript names for its calls (the latest), if any."""
    unseen: tuple[str, ...] = ALWAYS_UNSEEN
    """What the calls sent that the transcript does not hold (`unseen_inputs`, in `formats/_recorded.py`)."""

    @property
    def anchored(self) -> bool:
        """True when any call's count is anchored on recorded usage."""
        return any(c.anchor is not None for c in self.calls)

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
        """Recorded input minus the estimated messages at the first recorded call: about the size of
        what the transcript does not hold (`unseen`), give or take the tokenizer."""
        first = next(iter(self.recorded_calls), None)
        return None if first is None or first.recorded is None else first.recorded - first.estimated_before

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
        return min(1.0, sum(c.reused for c in self.calls) / total) if total else 0.0

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
                "anchored_on_recorded_usage": r.anchored,
                "not_in_transcript": list(r.unseen),
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
                (
                    f"replayed call by call, window {r.window:,} ({_window_origin(r)}): "
                    f"pipeline {r.pipeline}",
                    headers,
                    rows,
                )
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
        unseen = _unseen_phrase(r.unseen)
        if not r.anchored:
            notes = [f"The replay counts the messages only: not in the transcript are {unseen}."]
        else:
            notes = [
                "Each call is counted from the usage the provider reported for the call before it, "
                f"which includes what is not in the transcript ({unseen}), plus an estimate of the "
                "messages since; a call with no recorded call before it counts its messages only."
            ]
        if r.recorded_calls:
            estimate = r.unseen_estimate
            notes.append(
                f"recorded: the input the provider reported for {len(r.recorded_calls)} of "
                f"{len(r.calls)} calls"
                + (
                    f"; about {estimate:,} tokens of it at the first call are not in the transcript"
                    if estimate and estimate > 0
                    else ""
                )
                + "."
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
                style = "bold" if not rows and title.startswith("nothing") else ""
                rendered += [Text(title, style=style), Text("")]
                continue
            table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
            first = max((len(row[0]) for row in rows), default=0)
            for n, header in enumerate(headers):
                if n == 0:
                    # Labels (processor and tool names) stay on one line, and a path keeps most of
                    # its width; only a very long one folds.
                    table.add_column(header, justify="left", overflow="fold", min_width=min(first, 56))
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
        # A line needs two points: a short replay (one call draws nothing at all) gets a dot a call.
        dots = {"marker": "o", "markersize": 4} if len(calls) < _DOTS_BELOW else {}
        ax.plot(calls, [c.before for c in r.calls], label="raw history", color="#b0b0b0", **dots)
        ax.plot(calls, [c.after for c in r.calls], label="processed", color="#1f6feb", **dots)
        if r.recorded_calls:
            ax.plot(
                [c.call for c in r.recorded_calls],
                [c.recorded for c in r.recorded_calls],
                label="recorded usage",
                color="#2da44e",
                linewidth=1,
                **dots,
            )
        ax.axhline(r.window, color="#d73a49", linestyle="--", linewidth=1, label=f"window {r.window:,}")
        ax.set_xlabel("model call")
        ax.set_ylabel("input tokens")
        ax.set_title(f"{self.name}\npipeline: {r.pipeline}", fontsize=9, loc="left")
        ax.yaxis.set_major_formatter(_thousands())
        ax.xaxis.set_major_locator(_whole_numbers())  # calls are counted, never 2.5
        ax.margins(x=0.01)
        if len(calls) == 1:
            # Else the axis spans a hair around the one call, ticked in fractions of a call.
            ax.set_xlim(0.5, 1.5)
            ax.set_xticks(calls)
        # Outside the axes, so it never covers the curves (the processed one hugs the window).
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, frameon=False, fontsize=8)
        return ax


_DOTS_BELOW = 30
"""Replays of fewer calls are plotted with a dot at each call, so that every call shows."""


def _unseen_phrase(unseen: Sequence[str]) -> str:
    """What the calls sent that the transcript lacks (`formats.recorded.unseen_inputs`), as words."""
    every_call = [u for u in unseen if u in ALWAYS_UNSEEN]
    phrase = "the " + " and the ".join(every_call) + " sent with every call" if every_call else ""
    if PARENT_CONVERSATION in unseen:
        parent = (
            f"{PARENT_CONVERSATION} that this compaction agent's one call summarised (it is in the "
            "parent session's log)"
        )
        phrase = f"{phrase}, and {parent}" if phrase else parent
    others = [u for u in unseen if u not in ALWAYS_UNSEEN and u != PARENT_CONVERSATION]
    return ", ".join([phrase, *others]) if phrase else ", ".join(others)


def _window_origin(r: Replay) -> str:
    """Where a replay's window came from, for its heading."""
    if r.window_source == "genai-prices":
        return f"{r.model}, from genai-prices"
    if r.window_source == "transcript":
        return "recorded in the transcript"
    if r.window_source == "default":
        return "historykit's default: " + (
            f"genai-prices does not know {r.model}" if r.model else "the transcript names no model"
        )
    return "given"


def _whole_numbers() -> Any:
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(integer=True)


def _thousands() -> Any:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda value, _pos: f"{value / 1000:,.0f}k" if value >= 1000 else f"{value:,.0f}")


def analyze(
    messages: Sequence[Message],
    *,
    window: int | None = None,
    pipeline: HistoryProcessor | None = None,
    counter: TokenCounter | None = None,
    name: str = "transcript",
    format: str = "neutral",
    top: int = 10,
    on_call: Callable[[int, int], None] | None = None,
    boundaries: Sequence[int] | None = None,
) -> Analysis:
    """Analyse a neutral history; with a `pipeline`, replay it call by call under `window`.

    `window`: `None` takes the transcript's (the window an agent log records, else its model's from
    genai-prices, else the default).
    `on_call(done, total)` is called after each replayed model call (for progress bars).
    `boundaries`: indices of the messages where the agent's own compaction started a new context;
    `None` finds them in an agent log (`historykit.formats.compaction_boundaries`), `()` ignores
    them; the replay starts afresh at each.
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
    from historykit.processors._clear_tool_results import describe_call

    if root is not None and isinstance(call.arguments, dict):
        prefix = root.rstrip("/") + "/"
        shorter = {k: v.replace(prefix, "") if isinstance(v, str) else v for k, v in call.arguments.items()}
        call = replace(call, arguments=shorter)
    return describe_call(call)


def _file_accesses(messages: Sequence[Message]) -> tuple[list[tuple[ToolCallPart, Any]], str | None]:
    """Each tool call with what it did to a file, and the directory every absolute path is under."""
    from historykit.processors._file_reads import FileRead, FileWrite, file_accesses

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
    from historykit.processors._file_reads import FileRead

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
    window: int | None = None,
    counter: TokenCounter | None = None,
    on_call: Callable[[int, int], None] | None = None,
    boundaries: Sequence[int] | None = None,
) -> Replay:
    """Replay `messages` model call by model call through `pipeline` in persistent mode.

    `window`: the context window; `None` takes the transcript's (the window the log records, else its
    model's, else the default). At each index of `boundaries`
    (the agent's own compactions; `None` finds them in the messages, `()` ignores them) the context
    starts afresh: the calls after it see that message and what follows, raw and processed alike.
    Each call's size is anchored on the usage recorded for the call before it (`CallSize`).
    """
    from historykit._validity import check_neutral

    resolved = transcript_window(messages, window)
    if boundaries is None:
        boundaries = compaction_boundaries(messages)
    if not isinstance(pipeline, Pipeline):
        pipeline = Pipeline([pipeline], counter=counter)
    elif counter is not None and pipeline.counter is not counter:
        pipeline = Pipeline(pipeline.processors, counter=counter)
    tokens = pipeline.counter
    estimate = tokens.count_message
    raw_sizes = [estimate(m) for m in messages]
    call_points = [i for i, m in enumerate(messages) if m.role == "assistant"]
    tallies: dict[str, _Tally] = {}
    sizes: list[CallSize] = []
    carried: list[Message] = []
    previous: list[Message] = []
    start = consumed = 0  # where the current context starts; what the replay has taken in
    raw_estimate = 0
    latest_usage: int | None = None  # the latest message of the current context with usage
    starts = sorted(set(b for b in boundaries if 0 <= b < len(messages)))
    for n, point in enumerate(call_points, start=1):
        restart = [b for b in starts if consumed <= b < point]
        if restart:
            start = consumed = restart[-1]
            raw_estimate, carried, latest_usage = 0, [], None
        raw_estimate += sum(raw_sizes[consumed:point])
        latest_usage = next(
            (i for i in range(point - 1, consumed - 1, -1) if messages[i].usage is not None), latest_usage
        )
        history = carried + list(messages[consumed:point])
        consumed = point
        try:
            result = pipeline.run(history, resolved.tokens, window_source=resolved.source)
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
            reused += estimate(new)
        previous = carried
        carried_estimate = sum(estimate(m) for m in carried)
        anchored = _anchored_count(tokens, messages, start, latest_usage, point, raw_estimate)
        freed = raw_estimate - carried_estimate
        beyond_messages = max(0, anchored.tokens - raw_estimate)
        usage = messages[point].usage
        sizes.append(
            CallSize(
                n,
                anchored.tokens,
                max(0, anchored.tokens - freed),
                reused + (beyond_messages if n > 1 else 0),
                usage.input_tokens if usage else None,
                raw_estimate,
                carried_estimate,
                anchored.anchor_index,
            )
        )
        if on_call is not None:
            on_call(n, len(call_points))
    violations = tuple(str(v) for v in check_neutral(carried)) if carried else ()
    processors = tuple(
        ProcessorSavings(name, t.calls, t.tokens_freed, t.replaced, t.removed, t.added, t.markers)
        for name, t in sorted(tallies.items(), key=lambda kv: kv[1].order)
    )
    return Replay(
        resolved.tokens,
        _pipeline_name(pipeline),
        tuple(sizes),
        processors,
        violations,
        tuple(starts),
        resolved.source,
        transcript_model(messages),
        unseen_inputs(messages),
    )


def _anchored_count(
    tokens: TokenCounter,
    messages: Sequence[Message],
    start: int,
    latest_usage: int | None,
    point: int,
    estimate: int,
) -> TokenCount:
    """The raw history `messages[start:point]` as the core counts it (`TokenCounter.count`): the usage
    recorded for the latest call stands for everything up to its answer (what the transcript does
    not hold included), the messages since are estimated.

    The same count as `tokens.count(messages[start:point])`, made from the latest message with usage
    on, so that a long replay does not go over its whole context at every call; `estimate` (the
    messages' estimate) is the count when no message has usage. Anchor indices are into `messages`.
    """
    if latest_usage is not None:
        tail = tokens.count(messages[latest_usage:point])
        if tail.anchor_index is not None:
            return replace(tail, anchor_index=latest_usage + tail.anchor_index)
        whole = tokens.count(messages[start:point])  # usage that anchors nothing (no input tokens)
        if whole.anchor_index is not None:
            return replace(whole, anchor_index=start + whole.anchor_index)
    return TokenCount(estimate, estimate, str(tokens.tokenizer_name))


def _pipeline_name(pipeline: Pipeline) -> str:
    return " | ".join(p.name for p in pipeline.processors) or "(empty)"
