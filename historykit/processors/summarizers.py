"""Summarizers for `Summarize`: the seam, the extractive default, and the LLM adapters.

A summarizer is any callable that takes neutral messages and returns the summary text, sync or
async (`messages -> str` or `messages -> Awaitable[str]`). `Summarize` gives it the task (the first
user message), the previous summary when there is one (a message with a `SummaryPart`: update it,
do not summarize it), and the messages to cover. The summary is structured, under these headings:

    ## Task
    ## User constraints (verbatim)
    ## Decisions
    ## Files touched
    ## Done
    ## Pending
    ## Open errors

Built in:
- `ExtractiveSummarizer` (the default) needs no LLM: it builds the sections from the messages
  themselves, and merges them into the previous summary's;
- `PydanticAISummarizer` runs a Pydantic AI model (a name such as `"openai:gpt-4o-mini"`, a `Model`)
  or an `Agent`;
- `LangChainSummarizer` runs a LangChain chat model (`BaseChatModel.ainvoke`).

A summarizer may carry a `model_name` attribute: `Summarize` records it in the compaction marker.
Model reasoning (thinking) is never copied into a summary, nor shown to a summarizing model: it must
not turn into text.

Example:
    ```python
    from historykit.processors.summarize import Summarize
    from historykit.processors.summarizers import ExtractiveSummarizer, PydanticAISummarizer

    Summarize(max_fraction=0.8)                                     # extractive, no LLM
    Summarize(max_fraction=0.8, model="openai:gpt-4o-mini")         # Pydantic AI
    Summarize(max_fraction=0.8, summarizer=PydanticAISummarizer(my_agent))
    Summarize(max_fraction=0.8, summarizer=lambda messages: "## Task\\n...")  # anything
    ```
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from historykit.messages import (
    Message,
    SummaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from historykit.processors.file_reads import shell_tokens

__all__ = [
    "SECTIONS",
    "SUMMARY_INSTRUCTIONS",
    "ExtractiveSummarizer",
    "LangChainSummarizer",
    "PydanticAISummarizer",
    "Summarizer",
    "ensure_constraints",
    "extract_constraints",
    "parse_sections",
    "render_transcript",
    "summarizer_for",
]

Summarizer = Callable[[Sequence[Message]], str | Awaitable[str]]
"""Neutral messages in, summary text out; sync or async."""

TASK, CONSTRAINTS, DECISIONS, FILES, DONE, PENDING, ERRORS = (
    "Task",
    "User constraints (verbatim)",
    "Decisions",
    "Files touched",
    "Done",
    "Pending",
    "Open errors",
)
SECTIONS = (TASK, CONSTRAINTS, DECISIONS, FILES, DONE, PENDING, ERRORS)
"""The headings of a summary, in order."""

SUMMARY_INSTRUCTIONS = """\
You compact the history of a long agent conversation so that the agent can carry on with less \
context. Write a structured summary in Markdown with exactly these sections, in this order, each \
a list of "- " bullets (write "- (none)" for an empty one):

## Task
## User constraints (verbatim)
## Decisions
## Files touched
## Done
## Pending
## Open errors

Rules:
- Under "User constraints (verbatim)", copy every sentence in which the user states a requirement \
(must, never, don't, only, always, ...) exactly as the user wrote it, one per bullet. Never \
paraphrase them.
- If a PREVIOUS SUMMARY is given, update it: keep what is still true, merge the new messages into \
its sections, move finished work from Pending to Done, drop errors that were fixed. Do not \
summarize the summary itself, and do not wrap it in another summary.
- Be specific: file paths, function and test names, commands, error messages.
- Keep it under about {budget} tokens.
"""
"""The instructions the LLM adapters send; `{budget}` is the summary's token budget."""

_PLACEHOLDER = "(none)"


# --- the structured format ------------------------------------------------------------------------


def parse_sections(text: str) -> dict[str, list[str]]:
    """The bullets of each `## ` section of a summary (headings as written, known or not)."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("## "):
            current = sections.setdefault(line[3:].strip(), [])
        elif current is not None and line.startswith("- "):
            item = line[2:].strip()
            if item and item != _PLACEHOLDER:
                current.append(item)
    return sections


def _render(sections: dict[str, list[str]]) -> str:
    blocks = []
    for heading in SECTIONS:
        items = sections.get(heading) or [_PLACEHOLDER]
        blocks.append(f"## {heading}\n" + "\n".join(f"- {item}" for item in items))
    return "\n\n".join(blocks)


# --- constraints: the user's own requirement sentences, verbatim ----------------------------------

_CONSTRAINT_CUE = re.compile(
    r"\b(must|mustn't|never|don't|do not|only|always|should|shouldn't|should not|need to|needs to|"
    r"required?|make sure|ensure|avoid|not allowed|cannot|can't|at most|at least|no more than)\b",
    re.IGNORECASE,
)
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'`(\[])")
_BULLET = re.compile(r"^(?:[-*•>]|\d+[.)])\s+")
_MAX_SENTENCE = 400


def _sentences(text: str) -> Iterator[str]:
    for raw in text.splitlines():
        line = _BULLET.sub("", raw.strip())
        for sentence in _SENTENCE_SPLIT.split(line):
            sentence = sentence.strip()
            if sentence:
                yield sentence


def _is_user_text(msg: Message) -> bool:
    return (
        msg.role == "user"
        and not any(isinstance(p, (ToolResultPart, SummaryPart)) for p in msg.parts)
        and not msg.text.startswith("[historykit] ")
    )


def _user_constraints(msg: Message) -> list[str]:
    found: list[str] = []
    for part in msg.parts:
        if not isinstance(part, TextPart):
            continue
        # Pinned text is a constraint as a whole; other text only where it states a requirement.
        pinned = part.pinned or msg.pinned
        found.extend(
            s
            for s in _sentences(part.text)
            if len(s) <= _MAX_SENTENCE and (pinned or _CONSTRAINT_CUE.search(s))
        )
    return found


def extract_constraints(messages: Sequence[Message], max_chars: int = 2_000) -> list[str]:
    """The user's requirement sentences, verbatim, from the previous summary and user messages.

    Sentences with a requirement cue (must, never, don't, only, always, ...) count, and every
    sentence of pinned user text. Within `max_chars`, later constraints win over earlier ones,
    except that the task (the first user message, which `Summarize` keeps verbatim anyway) yields
    first.
    """
    previous: list[str] = []
    task: list[str] = []
    later: list[str] = []
    seen_task = False
    for msg in messages:
        for part in msg.parts:
            if isinstance(part, SummaryPart):
                previous.extend(parse_sections(part.text).get(CONSTRAINTS, []))
        if not _is_user_text(msg):
            continue
        if not seen_task:
            task.extend(_user_constraints(msg))
            seen_task = True
        else:
            later.extend(_user_constraints(msg))
    ordered = _dedupe([*previous, *later])
    kept: list[str] = []
    used = 0
    for sentence in reversed(ordered):
        if used + len(sentence) > max_chars:
            break
        kept.append(sentence)
        used += len(sentence)
    kept.reverse()
    seen = set(kept)
    head: list[str] = []
    for sentence in _dedupe(task):
        if sentence in seen or used + len(sentence) > max_chars:
            continue
        head.append(sentence)
        used += len(sentence)
    return head + kept


def ensure_constraints(text: str, constraints: Sequence[str]) -> str:
    """`text` with every constraint present verbatim: missing ones are added to its section."""
    missing = [c for c in constraints if c not in text]
    if not missing:
        return text
    bullets = "\n".join(f"- {c}" for c in missing)
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if line.startswith("## ") and line[3:].strip().lower().startswith("user constraints"):
            end = index + 1
            while end < len(lines) and not lines[end].startswith("## "):
                end += 1
            while end > index + 1 and not lines[end - 1].strip():
                end -= 1
            body = [ln for ln in lines[index + 1 : end] if ln.strip() != f"- {_PLACEHOLDER}"]
            return "\n".join([*lines[: index + 1], *body, bullets, *lines[end:]])
    return f"{text.rstrip()}\n\n## {CONSTRAINTS}\n{bullets}"


def _dedupe(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


# --- files touched --------------------------------------------------------------------------------

_PATH_KEYS = ("file_path", "path", "filename", "notebook_path", "target_file", "file")
_READ_TOOLS = {"read", "read_file", "view", "open", "open_file", "cat", "view_file"}
_WRITE_TOOLS = {"write", "write_file", "create", "create_file"}
_EDIT_TOOLS = {"edit", "multiedit", "edit_file", "str_replace", "replace", "insert", "apply_patch", "patch"}
_EDITOR_COMMANDS = {"view": "read", "create": "written", "str_replace": "edited", "insert": "edited"}
_SHELL_READ = {"cat", "head", "tail", "nl", "less", "more", "open"}
_PATCH_FILE = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (\S+)", re.MULTILINE)
_OPEN_FILE = re.compile(r"open_file\(\s*['\"]([^'\"]+)['\"]")
_REDIRECT = re.compile(r"(?<![<>&\d])>{1,2}\s*([\w./~-][^\s;&|<>]*)")


def _shell_text(call: ToolCallPart) -> str | None:
    args = call.arguments
    if isinstance(args, str):
        return args if call.name.lower() in ("bash", "shell", "sh", "terminal", "execute_bash") else None
    for key in ("command", "cmd", "code", "script"):
        value = args.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return value[-1]
    return None


def _looks_like_path(token: str) -> bool:
    return (
        0 < len(token) <= 200
        and not token.startswith("-")
        and not any(c in token for c in "*?$`|;&<>(){}\"'")
        and ("." in token or "/" in token)
    )


def _files_of(call: ToolCallPart) -> list[tuple[str, str]]:
    """(path, action) pairs for a tool call; action is `read`, `written` or `edited`."""
    name = call.name.lower()
    args = call.arguments_dict()
    found: list[tuple[str, str]] = []
    path = next((args[k] for k in _PATH_KEYS if isinstance(args.get(k), str) and args[k]), None)
    if path is not None:
        command = args.get("command")
        if isinstance(command, str) and command in _EDITOR_COMMANDS:
            found.append((path, _EDITOR_COMMANDS[command]))
        elif name in _WRITE_TOOLS or "write" in name or "create" in name:
            found.append((path, "written"))
        elif name in _EDIT_TOOLS or "edit" in name or "replace" in name:
            found.append((path, "edited"))
        elif name in _READ_TOOLS or "read" in name or "view" in name or "open" in name:
            found.append((path, "read"))
    shell = _shell_text(call)
    if shell:
        found.extend(_files_of_shell(shell))
    return found


def _files_of_shell(command: str) -> list[tuple[str, str]]:
    found = [(m, "edited") for m in _PATCH_FILE.findall(command)]
    found.extend((m, "read") for m in _OPEN_FILE.findall(command))
    for segment in re.split(r"&&|\|\||;|\||\n", command):
        words = shell_tokens(segment, operators=False)
        if words is None:
            words = segment.split()
        if not words:
            continue
        program, rest = words[0], words[1:]
        operands = [w for w in rest if _looks_like_path(w)]
        if program in _SHELL_READ and operands:
            found.extend((w, "read") for w in operands)
        elif program == "sed" and operands:
            action = "edited" if any(w.startswith("-i") for w in rest) else "read"
            found.append((operands[-1], action))
        elif program in ("create", "touch") and operands:
            found.extend((w, "written") for w in operands)
        for target in _REDIRECT.findall(segment):
            if _looks_like_path(target) and not target.startswith("/dev/"):
                found.append((target, "written"))
    return found


_ACTION_ORDER = ("read", "written", "edited")
_FILE_ITEM = re.compile(r"^(.*) \(([a-z, ]+)\)$")


def _merge_files(items: list[str], calls: Iterable[ToolCallPart], max_files: int) -> list[str]:
    files: dict[str, set[str]] = {}
    for item in items:
        match = _FILE_ITEM.match(item)
        path, actions = (match.group(1), match.group(2).split(", ")) if match else (item, [])
        files.setdefault(path, set()).update(a for a in actions if a in _ACTION_ORDER)
    for call in calls:
        for path, action in _files_of(call):
            # Most recently touched last.
            actions = files.pop(path, set())
            actions.add(action)
            files[path] = actions
    rendered = [
        f"{path} ({', '.join(a for a in _ACTION_ORDER if a in actions)})" if actions else path
        for path, actions in files.items()
    ]
    return rendered[-max_files:]


# --- errors -----------------------------------------------------------------------------------------

_ERROR_LINE = re.compile(
    r"^(?:\w+(?:\.\w+)*(?:Error|Exception|Failure)\b.*|.*\berror(?:\[\w+\])?:.*|FAILED\b.*|"
    r".*command not found.*|.*No such file or directory.*|.*\b\d+ failed\b.*|fatal: .*)$",
    re.IGNORECASE,
)
_ERROR_ITEM = re.compile(r"^\[(.+?)\] (.*)$")


def _call_label(call: ToolCallPart | None, name: str | None) -> str:
    if call is None:
        return name or "tool"
    shell = _shell_text(call)
    detail = shell if shell is not None else next((str(v) for v in call.arguments_dict().values()), "")
    detail = " ".join(detail.split())
    if len(detail) > 60:
        detail = detail[:57] + "..."
    return f"{call.name}: {detail}" if detail else call.name


def _is_read(call: ToolCallPart | None) -> bool:
    return call is not None and any(action == "read" for _, action in _files_of(call))


_SEARCH_TOOLS = ("grep", "glob", "search", "find", "rg", "ls")


def _is_search(call: ToolCallPart | None) -> bool:
    """A search: its output quotes whatever it matched (error messages too), and no match may
    exit with status 1."""
    if call is None:
        return False
    if any(word in call.name.lower() for word in _SEARCH_TOOLS if word not in ("rg", "ls")):
        return True
    shell = _shell_text(call)
    if not shell:
        return False
    first = shell.strip().split(maxsplit=1)[0] if shell.strip() else ""
    return first in ("grep", "egrep", "rg", "ag", "find", "ls")


_EXIT_STATUS = re.compile(
    r"^(?:Exit code|exit code|exit status) ([1-9]\d*)\b|<returncode>\s*([1-9]\d*)\s*</returncode>"
)


def _error_of(result: ToolResultPart, call: ToolCallPart | None) -> str | None:
    content = result.content
    failed = result.is_error or "<tool_use_error>" in content[:200]
    content = content.replace("<tool_use_error>", "").replace("</tool_use_error>", "")
    lines = [ln.strip() for ln in content.splitlines() if ln.strip()]
    status = _EXIT_STATUS.search(content[:200])
    failed = failed or status is not None
    if (_is_search(call) and not result.is_error) or (_is_read(call) and not failed):
        return None  # quoted text (a file, search matches; no match at all), not a failure
    if "Traceback (most recent call last)" in content:
        after = content.rsplit("Traceback (most recent call last)", 1)[1].splitlines()
        tail = [ln.strip() for ln in after if ln.strip() and not ln.startswith((" ", "\t", "<"))]
        line = tail[-1] if tail else "Traceback"
    elif failed:
        informative = [ln for ln in lines if not _EXIT_STATUS.search(ln) and not ln.startswith("<")]
        line = next((ln for ln in informative if _ERROR_LINE.match(ln)), None) or (
            informative[0]
            if informative
            else f"exit status {(status.group(1) or status.group(2)) if status else 1}"
        )
    else:
        found = next((ln for ln in lines if _ERROR_LINE.match(ln)), None)
        if found is None:
            return None
        line = found
    line = line.strip() or "error"
    return line if len(line) <= 200 else line[:197] + "..."


def _open_errors(previous: list[str], messages: Sequence[Message], max_items: int) -> list[str]:
    errors: dict[str, str] = {}
    for item in previous:
        match = _ERROR_ITEM.match(item)
        if match:
            errors[match.group(1)] = match.group(2)
    calls: dict[str, ToolCallPart] = {}
    for msg in messages:
        for part in msg.parts:
            if isinstance(part, ToolCallPart):
                calls[part.id] = part
            elif isinstance(part, ToolResultPart):
                call = calls.get(part.tool_call_id)
                label = _call_label(call, part.name)
                error = _error_of(part, call)
                errors.pop(label, None)  # a later run of the same call settles the earlier one
                if error is not None:
                    errors[label] = error
    return [f"[{label}] {error}" for label, error in errors.items()][-max_items:]


# --- decisions, done, pending ---------------------------------------------------------------------

_DECISION_CUE = re.compile(
    r"\b(I'll|I will|we'll|we will|I'm going to|decided|instead|approach|the plan|rather than|the fix is|"
    r"the issue is|the problem is|root cause|the cause|because)\b",
    re.IGNORECASE,
)
_DONE_CUE = re.compile(
    r"\b(fixed|implemented|added|created|updated|removed|refactored|completed|resolved|now passes|"
    r"tests? pass(?:es|ed)?|all tests|successfully|works now|is working|done)\b",
    re.IGNORECASE,
)
_TRANSIENT = re.compile(
    r"^(?:(?:now|first|next|then|ok|okay|great|good),?\s+)?let(?: me|'s)\b", re.IGNORECASE
)
""""Let me read the file": a step being taken, not a decision or a result."""
_PENDING_CUE = re.compile(
    r"\b(next|todo|remaining|still need|still needs|will need|not yet|pending|left to|then I)\b",
    re.IGNORECASE,
)


def _clip(sentence: str, limit: int) -> str:
    sentence = " ".join(sentence.split())
    return sentence if len(sentence) <= limit else sentence[: limit - 3] + "..."


def _plan_items(call: ToolCallPart) -> list[tuple[str, str]] | None:
    """(item, status) pairs of a to-do / plan tool call (Claude Code `TodoWrite`, Codex `update_plan`)."""
    args = call.arguments_dict()
    items = args.get("todos") or args.get("plan")
    if not isinstance(items, list):
        return None
    out = []
    for item in items:
        if isinstance(item, dict):
            text = item.get("content") or item.get("step") or item.get("title")
            if isinstance(text, str):
                out.append((text, str(item.get("status", ""))))
    return out


@dataclass
class ExtractiveSummarizer:
    """The default summarizer: builds the structured sections from the messages, with no LLM.

    - task: the first user message (an excerpt; `Summarize` keeps the message itself verbatim);
    - user constraints: the user's requirement sentences, verbatim (see `extract_constraints`);
    - decisions, done, pending: sentences of the assistant's text (never its thinking) with the
      matching cues, and the latest to-do list or plan a tool call wrote;
    - files touched: paths from tool calls (path arguments, editor commands, shell reads, writes
      and patches) and what was done to them;
    - open errors: error results and tracebacks not settled by a later run of the same call.

    A previous summary among the messages is updated: its sections are merged with the new ones.
    Deterministic: the same messages give the same text.

    Example:
        ```python
        from historykit.processors.summarizers import ExtractiveSummarizer

        text = ExtractiveSummarizer()(messages)
        ```
    """

    max_items: int = 6
    """Bullets kept in each of decisions, done and pending (the latest win)."""
    max_item_chars: int = 200
    """Longer sentences are clipped (constraints are never clipped: longer ones are skipped)."""
    max_files: int = 25
    """Files listed (the most recently touched win)."""
    max_errors: int = 5
    """Open errors listed (the latest win)."""
    max_constraint_chars: int = 2_000
    """Room for verbatim constraints; past it, the latest constraints win."""
    task_chars: int = 500
    """Length of the task excerpt."""
    model_name: str | None = field(default=None, init=False)
    """No model: the compaction marker records `None`."""

    def __call__(self, messages: Sequence[Message]) -> str:
        previous: dict[str, list[str]] = {}
        for msg in messages:
            for part in msg.parts:
                if isinstance(part, SummaryPart):
                    previous = parse_sections(part.text)
        sections: dict[str, list[str]] = {
            TASK: previous.get(TASK) or self._task(messages),
            CONSTRAINTS: extract_constraints(messages, self.max_constraint_chars),
            FILES: _merge_files(
                previous.get(FILES, []),
                (p for m in messages for p in m.parts if isinstance(p, ToolCallPart)),
                self.max_files,
            ),
            ERRORS: _open_errors(previous.get(ERRORS, []), messages, self.max_errors),
        }
        decisions, done, pending = self._progress(messages)
        limit = self.max_items
        sections[DECISIONS] = _dedupe([*previous.get(DECISIONS, []), *decisions])[-limit:]
        sections[DONE] = _dedupe([*previous.get(DONE, []), *done])[-limit:]
        sections[PENDING] = (pending or previous.get(PENDING, []))[-limit:]
        return _render(sections)

    def _task(self, messages: Sequence[Message]) -> list[str]:
        first = next((m for m in messages if _is_user_text(m)), None)
        if first is None:
            return []
        return [_clip(first.text, self.task_chars)] if first.text.strip() else []

    def _progress(self, messages: Sequence[Message]) -> tuple[list[str], list[str], list[str]]:
        decisions: list[str] = []
        done: list[str] = []
        pending: list[str] = []
        plan: list[tuple[str, str]] | None = None
        clip = self.max_item_chars
        for msg in messages:
            if msg.role != "assistant":
                continue
            for part in msg.parts:
                if isinstance(part, ToolCallPart):
                    plan = _plan_items(part) or plan
                    continue
                if not isinstance(part, TextPart):
                    continue
                for sentence in _sentences(part.text):
                    if _TRANSIENT.match(sentence):
                        continue
                    if _DONE_CUE.search(sentence):
                        done.append(_clip(sentence, clip))
                    elif _PENDING_CUE.search(sentence):
                        pending.append(_clip(sentence, clip))
                    elif _DECISION_CUE.search(sentence):
                        decisions.append(_clip(sentence, clip))
        if plan:
            done.extend(_clip(text, clip) for text, status in plan if status == "completed")
            pending = [_clip(text, clip) for text, status in plan if status != "completed"] or pending
        return _dedupe(decisions), _dedupe(done), _dedupe(pending)


# --- rendering messages for an LLM ----------------------------------------------------------------


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit} more characters]"


def render_transcript(messages: Sequence[Message], max_part_chars: int = 2_000) -> str:
    """The messages as plain text for a summarizing model; long parts are cut, thinking is left out."""
    lines: list[str] = []
    for msg in messages:
        for part in msg.parts:
            if isinstance(part, SummaryPart):
                lines.append(
                    f"PREVIOUS SUMMARY (update it, do not summarize it):\n{part.text}\n\nNEW MESSAGES:"
                )
            elif isinstance(part, TextPart):
                if part.text.strip():
                    lines.append(f"[{msg.role}] {_cut(part.text, max_part_chars)}")
            elif isinstance(part, ThinkingPart):
                continue  # reasoning never becomes text, not even a summary's
            elif isinstance(part, ToolCallPart):
                lines.append(
                    f"[{msg.role} calls {part.name}] {_cut(part.arguments_text(), max_part_chars // 2)}"
                )
            elif isinstance(part, ToolResultPart):
                flag = " (error)" if part.is_error else ""
                lines.append(f"[result of {part.name or 'tool'}{flag}] {_cut(part.content, max_part_chars)}")
            else:
                lines.append(f"[{msg.role} {part.kind}]")
    return "\n".join(lines)


def _prompt(messages: Sequence[Message]) -> str:
    return "Summarize this conversation.\n\n" + render_transcript(messages)


# --- LLM adapters ---------------------------------------------------------------------------------


def _type_modules(obj: object) -> list[str]:
    return [f"{c.__module__}.{c.__qualname__}" for c in type(obj).__mro__]


@dataclass
class PydanticAISummarizer:
    """Summarizes with a Pydantic AI model name, `Model` or `Agent` (imported lazily).

    A model name or `Model` runs in an agent with the summary instructions; an `Agent` you give is
    run as it is, with the instructions at the top of the prompt.

    Example:
        ```python
        from pydantic_ai.models.function import FunctionModel
        from historykit.processors.summarizers import PydanticAISummarizer

        summarizer = PydanticAISummarizer("openai:gpt-4o-mini")
        summarizer = PydanticAISummarizer(FunctionModel(my_function))
        text = await summarizer(messages)
        ```
    """

    model: Any
    """A model name (`"provider:model"`), a `pydantic_ai.models.Model`, or a `pydantic_ai.Agent`."""
    instructions: str = SUMMARY_INSTRUCTIONS
    """What the model is asked to do; `{budget}` is replaced by `budget_tokens`."""
    budget_tokens: int = 2_000
    """The size the model is asked to stay under."""
    _agent: Any = field(default=None, init=False, repr=False)

    @property
    def model_name(self) -> str | None:
        model = self.model
        if _is_agent(model):
            model = model.model
            if model is None:
                return getattr(self.model, "name", None)
        if isinstance(model, str):
            return model
        return getattr(model, "model_name", None) or type(model).__name__

    async def __call__(self, messages: Sequence[Message]) -> str:
        instructions = self.instructions.format(budget=self.budget_tokens)
        if _is_agent(self.model):
            result = await self.model.run(f"{instructions}\n\n{_prompt(messages)}")
        else:
            if self._agent is None:
                from pydantic_ai import Agent

                self._agent = Agent(self.model, instructions=instructions, output_type=str)
            result = await self._agent.run(_prompt(messages))
        output = result.output
        return output if isinstance(output, str) else str(output)


def _is_agent(obj: object) -> bool:
    return any(
        name.startswith("pydantic_ai.") and name.endswith("AbstractAgent") for name in _type_modules(obj)
    )


@dataclass
class LangChainSummarizer:
    """Summarizes with a LangChain chat model (`BaseChatModel.ainvoke`; imported lazily).

    Example:
        ```python
        from langchain_openai import ChatOpenAI
        from historykit.processors.summarizers import LangChainSummarizer

        summarizer = LangChainSummarizer(ChatOpenAI(model="gpt-4o-mini"))
        text = await summarizer(messages)
        ```
    """

    chat_model: Any
    """A `langchain_core.language_models.BaseChatModel`."""
    instructions: str = SUMMARY_INSTRUCTIONS
    """What the model is asked to do; `{budget}` is replaced by `budget_tokens`."""
    budget_tokens: int = 2_000
    """The size the model is asked to stay under."""

    @property
    def model_name(self) -> str | None:
        for attr in ("model_name", "model", "model_id"):
            value = getattr(self.chat_model, attr, None)
            if isinstance(value, str) and value:
                return value
        return type(self.chat_model).__name__

    async def __call__(self, messages: Sequence[Message]) -> str:
        from langchain_core.messages import HumanMessage, SystemMessage

        response = await self.chat_model.ainvoke(
            [
                SystemMessage(self.instructions.format(budget=self.budget_tokens)),
                HumanMessage(_prompt(messages)),
            ]
        )
        return _langchain_text(getattr(response, "content", response))


def _langchain_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for block in content:
            if isinstance(block, str):
                texts.append(block)
            elif isinstance(block, dict) and block.get("type") == "text":
                texts.append(str(block.get("text", "")))
        return "".join(texts)
    return str(content)


def summarizer_for(model: Any, budget_tokens: int = 2_000) -> Summarizer:
    """The adapter for a Pydantic AI model name / `Model` / `Agent`, or a LangChain chat model.

    Raises `TypeError` naming the type of anything else.
    """
    if isinstance(model, str):
        return PydanticAISummarizer(model, budget_tokens=budget_tokens)
    names = _type_modules(model)
    if any(n.startswith("pydantic_ai.") for n in names):
        return PydanticAISummarizer(model, budget_tokens=budget_tokens)
    if any(n.startswith("langchain") for n in names) and hasattr(model, "ainvoke"):
        return LangChainSummarizer(model, budget_tokens=budget_tokens)
    raise TypeError(
        f"model must be a Pydantic AI model name, Model or Agent, or a LangChain chat model; got a "
        f"{type(model).__module__}.{type(model).__qualname__} (pass any callable as summarizer= instead)"
    )
