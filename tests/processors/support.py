"""What the processor tests share: contexts and token counts, request points, the replay of a
history call by call (view-only and persistent), the rules every compaction keeps, and a Pydantic AI
agent that reads files.

Pytest rewrites the asserts of test modules and conftest files only, so the checks here carry their
own messages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, cast

from historykit._messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from historykit._pipeline import HistoryProcessor, Pipeline, ProcessContext, StepNotes
from historykit._tokens import TokenCounter, heuristic_tokenizer
from historykit._validity import check_neutral, current_cycle_start, final_request_start
from historykit.processors._offload_tool_outputs import is_offloaded
from historykit.processors._pairwise_truncate import PairwiseTruncate
from historykit.processors._trigger import Trigger
from historykit.processors._turns import (
    head_end,
    is_compaction_message,
    notice_count,
    split_units,
)

COUNTER = TokenCounter()
FAST = TokenCounter(tokenizer=heuristic_tokenizer)
"""For generated histories: the heuristic is exact enough and does not depend on tiktoken files."""


def context(window: int = 100_000, counter: TokenCounter = COUNTER) -> ProcessContext:
    """A context with an explicit `window` (tokens) and `counter`."""
    return ProcessContext(window, "explicit", counter)


def tokens(messages: list[Message], counter: TokenCounter = COUNTER) -> int:
    """The tokens of `messages`, message by message, as processors count them."""
    return sum(counter.count_message(m) for m in messages)


def file_text(name: str, lines: int = 60) -> str:
    """`lines` lines of made-up source code that mention `name`."""
    return "\n".join(f"{name} line {k}: value_{k} = compute({k}, '{name}')" for k in range(lines))


def exchange(n: int, lines: int = 40, *, parallel: int = 1, pinned: bool = False) -> list[Message]:
    """An assistant message with `parallel` Read calls and one tool message per result."""
    calls = tuple(
        ToolCallPart(f"c{n}_{k}", "Read", {"file_path": f"src/f{n}_{k}.py"}) for k in range(parallel)
    )
    results = [
        Message("tool", (ToolResultPart(c.id, "Read", file_text(f"f{n}", lines), pinned=pinned and k == 0),))
        for k, c in enumerate(calls)
    ]
    return [Message("assistant", (TextPart(f"Reading batch {n}."), *calls)), *results]


def agent_session(steps: int, lines: int = 40) -> list[Message]:
    """A system prompt, a task, `steps` tool exchanges, and the final tool results."""
    history = [Message.system("You are a coding agent."), Message.user("Find the bug in src/.")]
    for n in range(steps):
        history += exchange(n, lines)
    return history


# --- replaying a history call by call ----------------------------------------------------------------


def request_points(messages: list[Message]) -> list[int]:
    """Where the model was called: before each assistant message (not the first), and the end."""
    return [i for i, m in enumerate(messages) if m.role == "assistant" and i > 0] + [len(messages)]


def view_only(processor: HistoryProcessor, ctx: ProcessContext) -> Callable[[list[Message]], list[Message]]:
    """View-only mode as a framework drives it: a raw history in, the view the model is sent out
    (derived by the pipeline's replay of the model calls, `historykit._view`)."""
    pipeline = Pipeline([processor], counter=ctx.counter)

    def view(raw: list[Message]) -> list[Message]:
        return list(pipeline.run(raw, ctx.context_window, mode="view", conversation="view-only").messages)

    return view


def view_only_outputs(
    processor: HistoryProcessor, history: list[Message], ctx: ProcessContext
) -> list[list[Message]]:
    """View-only mode: the view at every request point, each from the raw prefix."""
    view = view_only(processor, ctx)
    return [view(history[:t]) for t in request_points(history)]


def persistently(processor: HistoryProcessor) -> HistoryProcessor:
    """`processor` as persistent mode runs it: in a pipeline, which marks what each step writes
    (`pipeline.mark_written`), as the stored history keeps it (the adapters' `EDIT_KEY`)."""
    return processor if isinstance(processor, Pipeline) else Pipeline([processor])


def carry_forward(
    processor: HistoryProcessor, history: list[Message], ctx: ProcessContext
) -> Iterator[tuple[list[Message], StepNotes]]:
    """Persistent mode: at every request point, process the previous output plus the messages that
    came since, and yield the output with its notes."""
    carried: list[Message] = []
    last = 0
    processor = persistently(processor)
    for t in request_points(history):
        carried, notes = processor.process(carried + history[last:t], ctx)
        last = t
        yield carried, notes


@dataclass
class ReplayStep:
    """One request point of `replay_both_modes`."""

    point: int
    """The request point: the output is for `history[:point]`."""
    output: list[Message]
    """The processed history, the same in both modes."""
    grown: list[Message] | None
    """When `output` does not extend the previous step's output (an edit between two calls): that
    output plus the messages that came since, which is what persistent mode processed. Otherwise
    None, and always None at the first step."""


def replay_both_modes(
    view: HistoryProcessor, persistent: HistoryProcessor, history: list[Message], ctx: ProcessContext
) -> Iterator[ReplayStep]:
    """At every request point, process the raw prefix with `view` and the carried output plus the
    new messages with `persistent`, assert that both give the same history, and yield the step.

    `view` and `persistent` may be the same processor, or two instances when one must not see what
    the other cached.
    """
    carried: list[Message] = []
    previous: list[Message] | None = None
    last = 0
    derive = view_only(view, ctx)
    persistent = persistently(persistent)
    for t in request_points(history):
        out = derive(history[:t])
        carried, _ = persistent.process(carried + history[last:t], ctx)
        assert carried == out, f"persistent and view-only modes disagree at request point {t}"
        grown = None
        if previous is not None and out[: len(previous)] != previous:
            grown = previous + history[last:t]
        yield ReplayStep(t, out, grown)
        previous, last = out, t


def assert_modes_agree(
    view: HistoryProcessor, persistent: HistoryProcessor, history: list[Message], ctx: ProcessContext
) -> list[Message]:
    """`replay_both_modes` to the end; returns the last output."""
    out: list[Message] = []
    for step in replay_both_modes(view, persistent, history, ctx):
        out = step.output
    return out


def assert_idempotent(processor: HistoryProcessor, out: list[Message], ctx: ProcessContext) -> None:
    """Processing an output again returns the very same list: nothing is left to do."""
    again, _ = processor.process(out, ctx)
    assert again is out, "processing an output again changed it"


# --- the rules every in-place edit keeps (ClearToolResults and DedupeFileReads) ----------------------


def assert_in_place_edit_rules(
    before: list[Message], after: list[Message], *, shortens: bool = False
) -> None:
    """What an edit that keeps every message in place never breaks: a valid history stays valid, no
    message is left empty, the final request is the very same objects (`shortens`: or the same with
    tool results shortened, `kept_or_shortened`), and the thinking of the current tool-use cycle is
    unchanged."""
    if not check_neutral(before):
        assert check_neutral(after) == [], check_neutral(after)
    assert all(m.parts for m in after), "an empty message"
    final = final_request_start(before)
    assert all(
        after[i] is before[i] or (shortens and kept_or_shortened(after[i], before[i]))
        for i in range(final, len(before))
    ), "the final request changed"
    cycle = current_cycle_start(before)
    for old, new in zip(before[cycle:], after[cycle:]):
        assert [p for p in new.parts if isinstance(p, ThinkingPart)] == [
            p for p in old.parts if isinstance(p, ThinkingPart)
        ], f"the thinking of the current tool-use cycle changed: {new}"


def kept_or_shortened(sent: Message, original: Message) -> bool:
    """`sent` is `original`, or `original` with tool results shortened by the last resort that fits
    an oversized final request (`historykit.processors._final_request`) or when they arrived
    (`OffloadToolOutputs`): same parts, same calls answered, each changed result shorter and saying
    what was cut."""
    if sent is original or sent == original:
        return True
    if sent.role != original.role or len(sent.parts) != len(original.parts):
        return False
    for new, old in zip(sent.parts, original.parts, strict=True):
        if new == old:
            continue
        if not (isinstance(new, ToolResultPart) and isinstance(old, ToolResultPart)):
            return False
        if new.tool_call_id != old.tool_call_id or old.pinned:
            return False
        said = "[historykit: about" in new.content or is_offloaded(new.content)
        if len(new.content) >= len(old.content) or not said:
            return False
    return True


# --- the rules every compaction keeps (PairwiseTruncate and Summarize) -------------------------------


def assert_compaction_rules(before: list[Message], after: list[Message]) -> None:
    """What neither `PairwiseTruncate` nor `Summarize` may ever break."""
    if not check_neutral(before):
        assert check_neutral(after) == [], check_neutral(after)
    if after is before:
        return
    # A final request shortened to fit the window stands for the one it was (same position, from
    # the end): count it as kept, under the original's identity.
    final = before[final_request_start(before) :]
    after = list(after)
    for k in range(1, min(len(final), len(after)) + 1):
        if after[-k] is not final[-k] and kept_or_shortened(after[-k], final[-k]):
            after[-k] = final[-k]
    kept = {id(m) for m in after}
    given = {id(m) for m in before}
    made = [m for m in after if id(m) not in given]
    # The only new messages are the processor's own notice or summary; nothing else is rewritten.
    assert all(is_compaction_message(m) for m in made), made
    assert all(m.parts for m in after), "an empty message"
    # Kept messages stay in their order.
    order = {id(m): i for i, m in enumerate(before)}
    positions = [order[id(m)] for m in after if id(m) in order]
    assert positions == sorted(positions), positions
    # System messages, the task and the final request stay; the final request ends the history.
    for msg in before[: head_end(before)]:
        assert id(msg) in kept, msg
    assert all(id(m) in kept for m in before if m.role == "system"), "a system message went"
    assert after[len(after) - len(final) :] == final, "the final request does not end the history"
    assert all(a is b for a, b in zip(after[len(after) - len(final) :], final)), (
        "the final request changed (beyond shortening its tool results to fit the window)"
    )
    # Pinned content stays, verbatim (the same objects).
    for msg in before:
        if msg.pinned or any(p.pinned for p in msg.parts):
            assert id(msg) in kept, msg
    # A tool call and all its results (a parallel group) are kept or dropped together.
    for unit in split_units(before):
        inside = {id(m) in kept for m in before[unit.start : unit.end]}
        assert len(inside) == 1, (unit, before[unit.start : unit.end])
    # The thinking of the output's current tool-use cycle reaches the provider as it was.
    for msg in after[current_cycle_start(after) :]:
        if msg.role == "assistant":
            assert id(msg) in order, msg
    # Nothing turned from thinking into text.
    thinking = {p.text for m in before for p in m.parts if isinstance(p, ThinkingPart)}
    turned = [p for m in made for p in m.parts if isinstance(p, TextPart) and p.text and p.text in thinking]
    assert not turned, turned
    # At most one compaction message of each kind after the head.
    assert sum(1 for m in after if notice_count(m) is not None) <= 1, "more than one truncation notice"


Process = Callable[[list[Message]], tuple[list[Message], StepNotes]]
"""A processor with its context bound."""


def compaction_of(messages: list[Message]) -> list[Message]:
    """The notices and summaries in `messages`."""
    return [m for m in messages if is_compaction_message(m)]


def assert_replay_properties(
    history: list[Message],
    processor: HistoryProcessor,
    fresh: Callable[[], HistoryProcessor],
    high: int,
    ctx: ProcessContext,
) -> int:
    """Idempotence, persistent == view-only, and append-only between compactions; returns compactions."""
    points = request_points(history)
    # View-only mode at every call (the raw history each time), through the pipeline's replay.
    views = view_only_outputs(processor, history, ctx)
    out = views[-1]
    again, _ = fresh().process(out, ctx)
    assert again == out, "processing an output again changes it (not idempotent, or trickles)"
    # Persistent mode at every call: the processed history is carried forward.
    carried: list[Message] = []
    previous = 0
    run = fresh()
    for point, view in zip(points, views):
        carried, _ = run.process(carried + history[previous:point], ctx)
        previous = point
        assert carried == view, f"persistent and view-only modes disagree at request point {point}"
    # Append-only unless the high-water mark was crossed.
    counter = ctx.counter
    compactions = 0
    for (p0, v0), (p1, v1) in pairwise(zip(points, views)):
        appended = v0 + history[p0:p1]
        if v1 == appended:
            continue
        compactions += 1
        size, after = tokens(appended, counter), tokens(v1, counter)
        assert compaction_of(v1) != compaction_of(v0), "rewrote old messages without a new compaction"
        assert size > high, f"compacted below the high-water mark at {p1}: {size} <= {high}"
        assert after < size, f"a compaction that frees nothing at {p1}: {size} -> {after} tokens"
    return compactions


def assert_nothing_more_can_go(out: list[Message], counter: TokenCounter = COUNTER) -> None:
    """An output over its budget: cutting as far as the rules allow would free nothing more."""
    floor, _ = PairwiseTruncate(trigger=Trigger(max_tokens=1)).process(out, context(counter=counter))
    assert tokens(floor, counter) >= tokens(out, counter), "truncating further would free more"


# --- a Pydantic AI agent that reads files ------------------------------------------------------------


def file_reading_agent(
    processor: HistoryProcessor, paths: Sequence[str], read: Callable[[str], str]
) -> tuple[Any, list[list[Any]]]:
    """A Pydantic AI agent whose history goes through `processor` (a 2.x capability, or 1.x
    `history_processors`) and whose `FunctionModel` calls the `read_file` tool on each of `paths` in
    turn, one call a step (ids `call_0`, `call_1`, ...), then answers `done`; `read(path)` is what
    the tool returns.

    Returns the agent and the list every history the model is sent is appended to.
    """
    from pydantic_ai import Agent
    from pydantic_ai import messages as pai
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    seen: list[list[Any]] = []

    def model(messages: list[Any], info: AgentInfo) -> pai.ModelResponse:
        seen.append(messages)
        step = sum(isinstance(m, pai.ModelResponse) for m in messages)
        if step < len(paths):
            return pai.ModelResponse([pai.ToolCallPart("read_file", {"path": paths[step]}, f"call_{step}")])
        return pai.ModelResponse([pai.TextPart("done")])

    agent: Any
    try:
        from pydantic_ai.capabilities.process_history import ProcessHistory
    except ImportError:  # Pydantic AI 1.x
        agent = cast(Any, Agent)(FunctionModel(model), history_processors=[processor])
    else:
        agent = Agent(FunctionModel(model), capabilities=[ProcessHistory(processor)])

    @agent.tool_plain
    def read_file(path: str) -> str:
        return read(path)

    return agent, seen
