"""Judge mode: ask a model each probe's question with the compacted view and with the full history.

String matching (`historykit.evaluation._scoring`) says whether a probe's answer is *in* the view; a
judge says whether a model reading the view can *answer* with it, and checks the probe rules
independently of the extractive summarizer they share code with. For each probe asked, the judge
picks the last call that scores it (the furthest from where the fact appeared, the hardest point),
and asks the same question twice: with that call's view, and with that call's full history (the
raw transcript from the agent's own latest compaction). The question is built from the probe and
never contains its answer; the answer holds when each needle the question does not name is in the
model's reply, compared normalised (`historykit.evaluation.normalise`).

A judge is a Pydantic AI model name (`"anthropic:claude-haiku-4-5"`: the provider's key from its
environment variable), `Model` or `Agent`, a LangChain chat model (any framework's model the
summarizers take), or any callable `(prompt: str) -> str` (sync or async).
Each question is one request with the history as plain text in the prompt: a judge costs two
requests per probe asked, the second as long as the full history.

Example:
    ```python
    from historykit.evaluation import evaluate

    evaluation = evaluate(messages, window=32_000, judge="anthropic:claude-haiku-4-5", judge_probes=40)
    [(k.kind, k.view_share, k.full_share) for k in evaluation.judge_kinds]
    ```
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, cast

from historykit._messages import Message, ToolCallPart, ToolResultPart
from historykit.errors import ArgumentTypeError
from historykit.evaluation._matching import message_text, normalise
from historykit.evaluation._probes import KINDS, Probe, ProbeKind
from historykit.processors._summarizers import summarizer_for

JUDGE_INSTRUCTIONS = """\
You answer questions about an agent's conversation, which is given between <history> tags, from \
that history only. Quote exact values (paths, identifiers, code lines, error messages, commands) \
as the history writes them. If the history does not tell, answer "not in the history"."""
"""What the judge model is told before each question (the history, then the question follow)."""

BLANK = "____"
_CONTEXT_CHARS = 160
_CALL_CHARS = 120

Verdict = Literal["held", "recoverable", "lost"]
"""What string matching said of the probe at the call the judge asked about."""


@dataclass(frozen=True)
class JudgedProbe:
    """One probe asked of the judge at one call, with the compacted view and with the full history."""

    probe: int
    """Index into the evaluation's probes."""
    call: int
    """The call whose view and full history were given (the last call that scores the probe)."""
    question: str
    expected: tuple[str, ...]
    """The needles the reply must contain (those the question does not name)."""
    matched: Verdict
    """String matching's verdict at that call."""
    view_answer: str | None
    """The reply with the compacted view; `None` when the request failed (`view_error`)."""
    full_answer: str | None
    """The reply with the full history; `None` when the request failed (`full_error`)."""
    view_error: str | None = None
    full_error: str | None = None

    @property
    def view_correct(self) -> bool:
        return self.view_answer is not None and _contains(self.view_answer, self.expected)

    @property
    def full_correct(self) -> bool:
        return self.full_answer is not None and _contains(self.full_answer, self.expected)


@dataclass(frozen=True)
class JudgeKindScore:
    """The judge's answers for one probe kind."""

    kind: ProbeKind
    asked: int
    view_correct: int
    """Right with the compacted view."""
    full_correct: int
    """Right with the full history."""
    matched: int
    """Held in the view by string matching, at the calls asked about."""
    errors: int
    """Requests that failed (either history)."""

    @property
    def view_share(self) -> float | None:
        return self.view_correct / self.asked if self.asked else None

    @property
    def full_share(self) -> float | None:
        return self.full_correct / self.asked if self.asked else None


def judge_kind_scores(probes: Sequence[Probe], judged: Sequence[JudgedProbe]) -> tuple[JudgeKindScore, ...]:
    """Per kind, the judge's answers (`KINDS` order)."""
    out = []
    for kind in KINDS:
        mine = [j for j in judged if probes[j.probe].kind == kind]
        out.append(
            JudgeKindScore(
                kind,
                len(mine),
                sum(j.view_correct for j in mine),
                sum(j.full_correct for j in mine),
                sum(j.matched == "held" for j in mine),
                sum(j.view_error is not None or j.full_error is not None for j in mine),
            )
        )
    return tuple(out)


def _contains(answer: str, needles: Sequence[str]) -> bool:
    text = normalise(answer)
    return all(normalise(n) in text for n in needles)


def render_history(messages: Sequence[Message]) -> str:
    """The messages as the judge reads them: one `[role] text` block per message, nothing cut."""
    return "\n".join(f"[{m.role}] {message_text(m)}" for m in messages)


def _call_of(messages: Sequence[Message], result: ToolResultPart) -> ToolCallPart | None:
    for msg in messages:
        for part in msg.parts:
            if isinstance(part, ToolCallPart) and part.id == result.tool_call_id:
                return part
    return None


def _call_label(call: ToolCallPart | None, name: str | None) -> str:
    if call is None:
        return name or "a tool"
    args = " ".join(call.arguments_text().split())
    return f"{call.name}({args[:_CALL_CHARS]}{'...' if len(args) > _CALL_CHARS else ''})"


def _masked_context(text: str, value: str) -> str:
    """The line of `text` holding `value` (with the line before it when that line is little more
    than the value), the value blanked out and the line cut around it."""
    lines = text.splitlines()
    at = next((i for i, ln in enumerate(lines) if value in ln), None)
    if at is None:
        return BLANK
    line = lines[at]
    if len(line.strip()) < len(value) + 20 and at > 0:
        line = f"{lines[at - 1]} / {line}"
    where = line.find(value)
    start = max(0, where - _CONTEXT_CHARS // 2)
    excerpt = line[start : start + _CONTEXT_CHARS + len(value)]
    return " ".join(excerpt.replace(value, BLANK).split())


def judge_question(probe: Probe, messages: Sequence[Message]) -> tuple[str, tuple[str, ...]]:
    """The question to ask about `probe` and the needles a right reply contains.

    Never the answer in the question: recall blanks the value out of the line that gave it; the
    other kinds name the file, the failed call or the plan, and ask for what the probe holds.
    """
    if probe.kind == "recall":
        value = probe.needles[0]
        source = messages[probe.source]
        result = next((p for p in source.parts if isinstance(p, ToolResultPart) and value in p.content), None)
        if result is not None:
            where = f"The result of the agent's call {_call_label(_call_of(messages, result), result.name)}"
            context = _masked_context(result.content, value)
        else:
            where = "A message of the user"
            context = _masked_context(message_text(source), value)
        question = (
            f'{where} had this line: "{context}". Which exact value stands where {BLANK} is? '
            "Answer with the value."
        )
        return question, (value,)
    if probe.kind == "artifacts":
        path = probe.needles[0]
        question = (
            f"What was the latest change the agent made to the file {path}? Quote the longest line "
            "that change added, exactly."
        )
    elif probe.kind == "continuation":
        if "plan" in probe.question:
            question = (
                "List every open (not completed) item of the agent's current plan or todo list, "
                "each exactly as written."
            )
        else:
            question = "What is the user's current request? Quote it exactly as the user wrote it."
    else:
        error = probe.needles[0]
        source = messages[probe.source]
        result = next(
            (
                p
                for p in source.parts
                if isinstance(p, ToolResultPart) and normalise(error) in normalise(p.content)
            ),
            None,
        )
        label = _call_label(_call_of(messages, result), result.name) if result is not None else "a tool"
        question = (
            f"The agent's call {label} failed. Quote the error line it returned, and quote what the "
            "agent did next (its next command, or the first sentence it wrote)."
        )
    normalised = normalise(question)
    return question, tuple(n for n in probe.needles if normalise(n) not in normalised)


def judge_prompt(history: Sequence[Message], question: str) -> str:
    """One request's prompt: the history, then the question."""
    return f"<history>\n{render_history(history)}\n</history>\n\nQuestion: {question}"


Ask = Callable[[str], Awaitable[str]]


def asker(judge: Any) -> Ask:
    """An async `prompt -> reply` for `judge` (module docstring: what a judge may be).

    A framework's model runs in the summarizer its framework makes for it
    (`historykit.processors._summarizers.summarizer_for`, through the framework seam), with the
    judge's instructions in place of the summary's.
    """
    if isinstance(judge, str) or not callable(judge) or _is_framework_model(judge):
        try:
            runner = summarizer_for(judge)
        except ArgumentTypeError:
            raise ArgumentTypeError(
                "judge must be a Pydantic AI model name, Model or Agent, a LangChain chat model, or a "
                f"callable (prompt) -> str; got a {type(judge).__module__}.{type(judge).__qualname__}"
            ) from None
        if not callable(getattr(runner, "ask", None)) or not hasattr(runner, "instructions"):
            raise ArgumentTypeError(
                f"the summarizer {type(runner).__qualname__} made for the judge cannot ask a question"
            )
        # Both built-in summarizers are dataclasses with `instructions` and `ask` (checked above).
        asking: Any = replace(cast(Any, runner), instructions=JUDGE_INSTRUCTIONS)
        return cast(Ask, asking.ask)

    async def ask(prompt: str) -> str:
        reply = judge(prompt)
        if inspect.isawaitable(reply):
            reply = await reply
        return reply if isinstance(reply, str) else str(reply)

    return ask


def _is_framework_model(obj: object) -> bool:
    """A model some registered framework claims (a Pydantic AI `Agent` is callable too)."""
    try:
        summarizer_for(obj)
    except ArgumentTypeError:
        return False
    return True


async def ask_both(
    ask: Ask, view: Sequence[Message], full: Sequence[Message], question: str
) -> tuple[str | None, str | None, str | None, str | None]:
    """(view reply, full reply, view error, full error): a failed request (a provider refusing a
    history over its window, a rate limit) is recorded for that question, so one refusal does not
    lose the answers already paid for."""
    replies: list[str | None] = []
    errors: list[str | None] = []
    for history in (view, full):
        try:
            replies.append(await ask(judge_prompt(history, question)))
            errors.append(None)
        except Exception as error:  # any provider or network failure (docstring)
            replies.append(None)
            errors.append(f"{type(error).__name__}: {error}"[:300])
    return replies[0], replies[1], errors[0], errors[1]


def pick(probes: Sequence[Probe], candidates: Sequence[int], limit: int | None) -> list[int]:
    """Up to `limit` of the `candidates` (probe indices), the kinds taken in turn so each is asked
    about, each kind's in transcript order."""
    by_kind = [[n for n in candidates if probes[n].kind == kind] for kind in KINDS]
    order: list[int] = []
    for rank in range(max(map(len, by_kind), default=0)):
        order.extend(ns[rank] for ns in by_kind if rank < len(ns))
    return sorted(order if limit is None else order[:limit])
