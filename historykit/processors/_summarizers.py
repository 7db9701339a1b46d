"""Summarizers for `Summarize`: the seam, the extractive default, and the LLM adapters.

A summarizer is any callable that takes neutral messages and returns the summary text, sync or
async (`messages -> str` or `messages -> Awaitable[str]`). `Summarize` gives it the task (the first
user message), the previous summary when there is one (a message with a `SummaryPart`: update it,
do not summarize it), and the messages to cover. The summary is structured, under these headings:

    ## Task
    ## User messages (verbatim)
    ## User constraints (verbatim)
    ## Decisions
    ## Files touched
    ## Done
    ## Pending
    ## Open errors

Built in:
- `ExtractiveSummarizer` (the default) needs no LLM: it builds the sections from the messages
  themselves, and merges them into the previous summary's;
- `PydanticAISummarizer` (`historykit.plugins.pydantic_ai`) runs a Pydantic AI model (a name such as
  `"openai:gpt-4o-mini"`, a `Model`) or an `Agent`;
- `LangChainSummarizer` (`historykit.plugins.langchain`) runs a LangChain chat model
  (`BaseChatModel.ainvoke`).
- `summarizer_for(model)` picks the one for a model, asking each registered framework
  (`historykit.plugins.frameworks`).

Whatever a summarizer writes, `Summarize` completes it (`complete_summary`): every summary keeps
the user's own messages verbatim (`user_words`: not tool output, instruction files, reminders or
earlier summaries; past the room of `max_user_chars`, 8,000 characters by default, the most recent
stay whole and the older are shortened, never dropped, and the heading says how many), the user's
constraint sentences, and every file written or edited. An update keeps what the summary it
updates kept.

A summarizer that takes a `focus` keyword (`messages, focus=None`) gets the user's focus when a
compaction is asked for with one (`Pipeline.compact(focus=...)`); the built-in ones do: the LLM
adapters add it to their prompt (`FOCUS_INSTRUCTIONS`), `ExtractiveSummarizer` lists what matches
it first and records it under `## Focus`.

A summarizer may carry a `model_name` attribute: `Summarize` records it in the compaction marker,
and `max_user_chars` / `max_constraint_chars` attributes: the room `complete_summary` gives. A
summarizer may return a `NativeSummary` (a `str` carrying a provider's own compaction block, as the
native backends of `historykit.plugins.native_compaction` do): the summary keeps the block, and the
framework glue sends it to that provider in place of the text.
Model reasoning (thinking) is never copied into a summary, nor shown to a summarizing model: it must
not turn into text.

Example:
    ```python
    from historykit.processors import Summarize
    from historykit.plugins.pydantic_ai import PydanticAISummarizer
    from historykit.processors import ExtractiveSummarizer
    from historykit.processors import Trigger

    Summarize(trigger=Trigger(max_fraction=0.8))                      # extractive, no LLM
    Summarize(trigger=Trigger(max_fraction=0.8), model="openai:gpt-4o-mini")  # Pydantic AI
    Summarize(trigger=Trigger(max_fraction=0.8), summarizer=PydanticAISummarizer(my_agent))
    Summarize(trigger=Trigger(max_fraction=0.8), summarizer=lambda messages: "## Task\\n...")  # anything
    ```
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from historykit._frameworks import frameworks
from historykit._messages import (
    Message,
    ProviderCompaction,
    SummaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from historykit.errors import ArgumentTypeError, InvalidArgumentError
from historykit.processors._change_records import change_line
from historykit.processors._file_reads import FileRead, FileWrite, file_accesses, files_touched, shell_text

Summarizer = Callable[[Sequence[Message]], str | Awaitable[str]]
"""Neutral messages in, summary text out; sync or async."""


class NativeSummary(str):
    """Summary text that also carries the provider's own compaction of the same messages.

    Example:
        ```python
        from historykit import ProviderCompaction
        from historykit.processors import NativeSummary

        block = ProviderCompaction("anthropic", "claude-opus-5-5", '{"type": "compaction", "content": "..."}')
        summary = NativeSummary("## Task\n- ...", block)
        assert summary.provider_compaction is block
        ```
    """

    provider_compaction: ProviderCompaction
    """The block `Summarize` keeps on the summary (`SummaryPart.provider_compaction`)."""

    def __new__(cls, text: str, provider_compaction: ProviderCompaction) -> NativeSummary:
        if not isinstance(provider_compaction, ProviderCompaction):
            raise ArgumentTypeError(
                "provider_compaction must be a ProviderCompaction, got a "
                f"{type(provider_compaction).__qualname__}"
            )
        made = super().__new__(cls, text)
        made.provider_compaction = provider_compaction
        return made


TASK, USER_MESSAGES, CONSTRAINTS, DECISIONS, FILES, DONE, PENDING, ERRORS = (
    "Task",
    "User messages (verbatim)",
    "User constraints (verbatim)",
    "Decisions",
    "Files touched",
    "Done",
    "Pending",
    "Open errors",
)
SECTIONS = (TASK, USER_MESSAGES, CONSTRAINTS, DECISIONS, FILES, DONE, PENDING, ERRORS)
"""The headings of a summary, in order."""

SUMMARY_INSTRUCTIONS = """\
You compact the history of a long agent conversation so that the agent can carry on with less \
context. Write a structured summary in Markdown with exactly these sections, in this order, each \
a list of "- " bullets (write "- (none)" for an empty one):

## Task
## User messages (verbatim)
## User constraints (verbatim)
## Decisions
## Files touched
## Done
## Pending
## Open errors

Rules:
- Under "Task", copy the user's first request as the user wrote it (not instruction files, \
environment context or reminders that came with it).
- Under "User messages (verbatim)", copy every later message the user wrote, exactly as written, \
one per bullet, oldest first (indent a message's further lines by two spaces). Tool output, \
instruction files (AGENTS.md, CLAUDE.md), <system-reminder> blocks and earlier summaries are not \
the user's messages. Keep the messages a PREVIOUS SUMMARY lists.
- Under "User constraints (verbatim)", copy every sentence in which the user states a requirement \
(must, never, don't, only, always, ...) exactly as the user wrote it, one per bullet. Never \
paraphrase them.
- Under "Files touched", list every file that was written or edited (and the files read), with \
what was done to it: "path (read, edited)".
- If a PREVIOUS SUMMARY is given, update it: keep what is still true, merge the new messages into \
its sections, move finished work from Pending to Done, drop errors that were fixed. Do not \
summarize the summary itself, and do not wrap it in another summary.
- Be specific: file paths, function and test names, commands, error messages.
- Keep it under about {budget} tokens (the user's messages do not count).
"""
"""The instructions the LLM adapters send; `{budget}` is the summary's token budget."""

FOCUS_INSTRUCTIONS = """\
The summary should focus on the following, which the user asked for. Where it conflicts with the \
guidance above, follow it (but still copy the user's messages and constraints verbatim):
<focus>
{focus}
</focus>"""
"""What the LLM adapters add to the prompt of a manual compaction with a focus (the wording of
Pydantic AI's `compact_messages(instructions=)`); `{focus}` is the user's focus."""

_PLACEHOLDER = "(none)"


# --- the structured format ------------------------------------------------------------------------


def parse_sections(text: str) -> dict[str, list[str]]:
    """The bullets of each `## ` section of a summary (headings as written, known or not).

    A bullet's further lines are indented by two spaces (a user message of several lines): they
    belong to it.
    """
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    open_item = False
    for line in text.splitlines():
        if line.startswith("## "):
            current = sections.setdefault(line[3:].strip(), [])
            open_item = False
        elif current is None:
            continue
        elif line.startswith("- "):
            item = line[2:].strip()
            open_item = bool(item) and item != _PLACEHOLDER
            if open_item:
                current.append(item)
        elif open_item and (line.startswith("  ") or not line.strip()):
            current[-1] += "\n" + line[2:]
        else:
            open_item = False
    return {heading: [item.rstrip() for item in items] for heading, items in sections.items()}


def section(sections: dict[str, list[str]], heading: str) -> list[str]:
    """The bullets of the section whose heading starts with `heading` (a heading may carry a note
    in parentheses, as `User messages (verbatim; 3 of 40 shortened ...)` does)."""
    if heading in sections:
        return sections[heading]
    stem = heading.split(" (", 1)[0]
    return next((items for name, items in sections.items() if name.startswith(stem)), [])


def _render(sections: dict[str, list[str]], headings: dict[str, str] | None = None) -> str:
    blocks = []
    for heading in SECTIONS:
        items = sections.get(heading) or [_PLACEHOLDER]
        title = (headings or {}).get(heading, heading)
        blocks.append(f"## {title}\n" + "\n".join(_bullet(item) for item in items))
    return "\n\n".join(blocks)


def _bullet(item: str) -> str:
    first, *rest = item.split("\n")
    return "\n".join([f"- {first}", *(f"  {line}" for line in rest)])


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


# --- the user's own words -------------------------------------------------------------------------

_INJECTED = re.compile(
    # Blocks a harness adds to the user's turn: reminders, environment context, instruction files
    # (Codex's `<INSTRUCTIONS>` after "# AGENTS.md instructions for ...", older `<user_instructions>`),
    # background-task notices, slash-command echoes.
    r"(?:^#[^\n]*\b(?:AGENTS|CLAUDE|GEMINI)\.md\b[^\n]*\n\s*)?"
    r"<(system-reminder|environment_context|user_instructions|INSTRUCTIONS|task-notification|"
    r"command-name|command-message|command-args|local-command-stdout|local-command-stderr|"
    r"ide_selection|ide_opened_file|user-prompt-submit-hook)\b[^>]*>.*?</\1>"
    r"(?:\s*Read the output file to retrieve the result: \S+)?",
    re.DOTALL | re.MULTILINE,
)
_NOT_THE_USER = (
    "This session is being continued from a previous conversation",  # Claude Code's compaction summary
    "[Request interrupted by user",  # a harness notice of an interruption
    "Caveat: The messages below were generated by the user while running local commands",
    "Here is a demonstration of how to correctly accomplish this task",  # SWE-agent's demonstration
    "[historykit] ",  # a truncation notice
)
_CONTINUED = "This session is being continued from a previous conversation"


def user_words(msg: Message) -> str | None:
    """What the user wrote in `msg`, verbatim; `None` when it holds none of the user's words.

    Not the user's words: tool results, summaries (a `SummaryPart`, Claude Code's "This session is
    being continued ..." message, historykit's notices), and what a harness injects into the user's
    turn: `<system-reminder>` blocks (Claude Code's CLAUDE.md context among them), instruction files
    (Codex's "# AGENTS.md instructions for ..." with its `<INSTRUCTIONS>` block), environment
    context, background-task notices and slash-command echoes. Whatever is left of the text parts
    is the user's.
    """
    if msg.role != "user" or any(isinstance(p, (ToolResultPart, SummaryPart)) for p in msg.parts):
        return None
    texts = []
    for part in msg.parts:
        if not isinstance(part, TextPart):
            continue
        text = _INJECTED.sub("", part.text).strip() if "<" in part.text else part.text.strip()
        if text and not text.startswith(_NOT_THE_USER):
            texts.append(text)
    return "\n".join(texts) or None


_EARLIER_USER_MESSAGES = re.compile(
    r"^\s*\d+\.\s*All user messages:?\s*\n((?:[ \t]*-.*\n?|[ \t]+\S.*\n?)+)", re.MULTILINE
)


def _recorded_user_messages(msg: Message) -> list[str]:
    """The user's messages an agent's own earlier compaction recorded (Claude Code's summary lists
    them under "All user messages:"): the history before it is gone, so these are all that is left."""
    if msg.role != "user" or not msg.text.startswith(_CONTINUED):
        return []
    match = _EARLIER_USER_MESSAGES.search(msg.text)
    if match is None:
        return []
    items = [ln.strip()[1:].strip() for ln in match.group(1).splitlines() if ln.strip().startswith("-")]
    return [item for item in items if item]


def _is_user_text(msg: Message) -> bool:
    return user_words(msg) is not None


USER_MESSAGE_CHARS = 8_000
"""Default room for the user's messages in a summary (about 2,000 tokens)."""
SHORTENED_CHARS = 240
"""Default length an older user message is shortened to when they do not all fit."""
_MIN_SHORTENED = 60
_MARKER_CHARS = 40
"""About the length of the note a shortened message carries."""
_SHORTENED = re.compile(r" \[\.\.\. (\d+) characters shortened \.\.\.\] ")


@dataclass(frozen=True)
class UserMessages:
    """The user's words a summary keeps: the first request, and every later message in order."""

    task: str | None
    """The user's first request (what they wrote, without injected instructions or context)."""
    task_in_head: bool
    """The task is the first user message given, which `Summarize` keeps verbatim at the start of
    the history: a summary need not repeat all of it."""
    messages: list[str]
    """The later messages, oldest first: whole, or shortened when they did not all fit."""
    shortened: int
    """How many of `messages` are shortened (here or by an earlier summary)."""
    max_chars: int
    """The room they had."""

    def heading(self) -> str:
        if not self.shortened:
            return USER_MESSAGES
        return (
            f"User messages (verbatim; {self.shortened} of {len(self.messages)} older ones shortened "
            f"to fit {self.max_chars:,} characters)"
        )


def user_messages(
    messages: Sequence[Message], max_chars: int = USER_MESSAGE_CHARS, shortened_chars: int = SHORTENED_CHARS
) -> UserMessages:
    """The user's own messages among `messages` (see `user_words`), fitted into `max_chars`.

    An earlier summary's are kept (a historykit summary's list, or the "All user messages" a
    Claude Code compaction recorded). When they do not all fit, the most recent ones stay whole and
    the older ones are shortened (their head and tail, saying how much is left out), never dropped
    (so with very many messages the room is exceeded); the first request is the `task`, whole.
    """
    task: str | None = None
    task_in_head = False
    first_user = next((m for m in messages if m.role == "user"), None)
    found: list[str] = []
    for msg in messages:
        summary = next((p for p in msg.parts if isinstance(p, SummaryPart)), None)
        if summary is not None:
            earlier = parse_sections(summary.text)
            if task is None:
                task = next(iter(section(earlier, TASK)), None)
            found.extend(section(earlier, USER_MESSAGES))
            continue
        found.extend(_recorded_user_messages(msg))
        words = user_words(msg)
        if words is None or (task is not None and _is_pinned(msg)):
            continue  # a pinned message stays verbatim in the history: no need to copy it
        if task is None:
            task, task_in_head = words, msg is first_user
        else:
            found.append(words)
    later = [m for m in _dedupe(found) if m != task]
    fitted = _fit(later, max_chars, shortened_chars)
    shortened = sum(1 for m in fitted if _SHORTENED.search(m))
    return UserMessages(task, task_in_head, fitted, shortened, max_chars)


def _is_pinned(msg: Message) -> bool:
    return msg.pinned or any(isinstance(p, TextPart) and p.pinned for p in msg.parts)


def _fit(items: list[str], max_chars: int, shortened_chars: int) -> list[str]:
    """The newest items whole, as many as leave room for the older ones shortened.

    The older ones get at most half the room (shortened further when there are many, down to
    `_MIN_SHORTENED` characters); the newest item is whole unless it alone is over the room. Past
    that, the room is exceeded rather than a message dropped.
    """
    if sum(len(item) for item in items) <= max_chars:
        return items
    count = len(items)
    short = max(_MIN_SHORTENED, min(shortened_chars, max_chars // (2 * count) - _MARKER_CHARS))
    room = [0]  # room[i]: what items[:i] take once shortened
    for item in items:
        room.append(room[-1] + min(len(item), short + _MARKER_CHARS))
    used = 0
    whole_from = count
    for index in range(count - 1, -1, -1):
        newest_fits = index == count - 1 and len(items[index]) <= max_chars
        if not newest_fits and used + len(items[index]) + room[index] > max_chars:
            break
        used += len(items[index])
        whole_from = index
    return [_shorten(item, short) for item in items[:whole_from]] + items[whole_from:]


def _shorten(text: str, limit: int) -> str:
    if len(text) <= limit or _SHORTENED.search(text):
        return text
    head, tail = (limit * 2) // 3, limit // 3
    left_out = len(text) - head - tail
    return f"{text[:head]} [... {left_out} characters shortened ...] {text[len(text) - tail :]}"


def _flat(text: str) -> str:
    return " ".join(text.split())


def _user_constraints(msg: Message) -> list[str]:
    words = user_words(msg)
    if words is None:
        return []
    # Pinned text is a constraint as a whole; other text only where it states a requirement.
    pinned = _is_pinned(msg)
    return [s for s in _sentences(words) if len(s) <= _MAX_SENTENCE and (pinned or _CONSTRAINT_CUE.search(s))]


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
    return ensure_items(text, CONSTRAINTS, [c for c in constraints if c not in text])


def ensure_items(text: str, heading: str, missing: Sequence[str]) -> str:
    """`text` with `missing` added as bullets at the end of the section `heading` (made if absent)."""
    if not missing:
        return text
    bullets = "\n".join(_bullet(item) for item in missing)
    stem = heading.split(" (", 1)[0].lower()
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if line.startswith("## ") and line[3:].strip().lower().startswith(stem):
            end = index + 1
            while end < len(lines) and not lines[end].startswith("## "):
                end += 1
            while end > index + 1 and not lines[end - 1].strip():
                end -= 1
            body = [ln for ln in lines[index + 1 : end] if ln.strip() != f"- {_PLACEHOLDER}"]
            return "\n".join([*lines[: index + 1], *body, bullets, *lines[end:]])
    return f"{text.rstrip()}\n\n## {heading}\n{bullets}"


def _dedupe(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


# --- files touched --------------------------------------------------------------------------------

_ACTION_ORDER = ("read", "written", "edited")
_FILE_ITEM = re.compile(r"^(.*?) \(([a-z, ]+)\)(?:: added `(.*)`)?$")
"""A file of the files-touched section: `src/a.py (read, edited): added `def run(self) -> None:``,
the record of its latest change after the colon (`_change_records.change_line`)."""


def _merge_files(items: list[str], calls: Sequence[ToolCallPart], max_files: int) -> list[str]:
    """The previous summary's files merged with what `calls` did, most recently touched last.

    Every file written or edited is listed, whatever `max_files` says, with the record of its
    latest change (the longest line it added, `_change_records.change_line`): a summary keeps what
    changed, not only where. Files only read fill the room left, the most recently read first.
    What changed a file is `file_accesses`' verdict; the files a call names as read (`cat a b`,
    `grep x a.py | head`) and whether a change wrote a new file or edited one are `files_touched`'
    (both in `file_reads`, which resolve paths alike).
    """
    files: dict[str, set[str]] = {}
    changes: dict[str, str] = {}
    for item in items:
        match = _FILE_ITEM.match(item)
        path, actions = (match.group(1), match.group(2).split(", ")) if match else (item, [])
        files.setdefault(path, set()).update(a for a in actions if a in _ACTION_ORDER)
        if match and match.group(3):
            changes[path] = match.group(3)

    def touch(path: str, action: str) -> None:
        actions = files.pop(path, set())  # most recently touched last
        actions.add(action)
        files[path] = actions

    for call, access in zip(calls, file_accesses(calls)):
        loose = files_touched(call)
        for path, action in loose:
            if action == "read":
                touch(path, action)
        if isinstance(access, FileRead):
            touch(access.path, "read")
        elif isinstance(access, FileWrite):
            how = {path: action for path, action in loose if action != "read"}
            line = change_line(call)
            for path in access.paths:
                touch(path, how.get(path, "edited"))
                if line is not None:
                    changes[path] = line
                else:  # a change with nothing to say: an older record is no longer the latest
                    changes.pop(path, None)
    changed = {path for path, actions in files.items() if actions - {"read"}}
    room = max(0, max_files - len(changed))
    read_only = [path for path in files if path not in changed]
    shown = changed | set(read_only[max(0, len(read_only) - room) :])
    return [
        _file_item(path, actions, changes.get(path) if path in changed else None)
        for path, actions in files.items()
        if path in shown
    ]


def _file_item(path: str, actions: set[str], change: str | None) -> str:
    if not actions:
        return path
    item = f"{path} ({', '.join(a for a in _ACTION_ORDER if a in actions)})"
    # A backtick inside the record would end its code span early: it becomes a quote.
    return f"{item}: added `{change.replace('`', chr(39))}`" if change else item


def _changed_files(items: list[str], calls: Sequence[ToolCallPart]) -> list[str]:
    """The files written or edited: those the previous summary lists as such, and `calls`' writes."""
    found: list[str] = []
    for item in items:
        match = _FILE_ITEM.match(item)
        if match and set(match.group(2).split(", ")) - {"read"}:
            found.append(match.group(1))
    for access in file_accesses(calls):
        if isinstance(access, FileWrite):
            found.extend(access.paths)
    return _dedupe(found)


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
    shell = shell_text(call)
    detail = shell if shell is not None else next((str(v) for v in call.arguments_dict().values()), "")
    detail = " ".join(detail.split())
    if len(detail) > 60:
        detail = detail[:57] + "..."
    return f"{call.name}: {detail}" if detail else call.name


def _is_read(call: ToolCallPart | None) -> bool:
    return call is not None and any(action == "read" for _, action in files_touched(call))


_SEARCH_TOOLS = ("grep", "glob", "search", "find", "rg", "ls")


def _is_search(call: ToolCallPart | None) -> bool:
    """A search: its output quotes whatever it matched (error messages too), and no match may
    exit with status 1."""
    if call is None:
        return False
    if any(word in call.name.lower() for word in _SEARCH_TOOLS if word not in ("rg", "ls")):
        return True
    shell = shell_text(call)
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
    status = _EXIT_STATUS.search(content[:200])
    failed = failed or status is not None
    # The cheap tests first, and the lines only past them: a read's output is a whole file, and
    # telling a read needs its shell command parsed.
    if (not result.is_error and _is_search(call)) or (not failed and _is_read(call)):
        return None  # quoted text (a file, search matches; no match at all), not a failure
    lines = [ln.strip() for ln in content.splitlines() if ln.strip()]
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


ERROR_LINE_CHARS = 100
"""Characters of an error line kept by `error_line`."""
_ERROR_SHAPE = re.compile(
    r"(?:Error|Exception|Failure)\b|\berror(?:\[\w+\])?:|\bFAILED\b|command not found|"
    r"No such file or directory|fatal: |\b\d+ failed\b|\bis required\b|\bnot found\b",
    re.IGNORECASE,
)
"""What an error line says (`_error_of` finds the line; this keeps the ones that read as an error,
not a failing command's first line of output)."""
_LISTING_LINE = re.compile(r"^\s*\d+(?:→|\t|:\s)")
_EXCEPTION = re.compile(r"^\w+(?:\.\w+)*(?:Error|Exception|Failure)\b")


def error_line(result: ToolResultPart, call: ToolCallPart | None) -> str | None:
    """The error line of a result `_error_of` counts as an error, when it reads as one (what
    placeholders and probes keep of a failure, `ERROR_LINE_CHARS` characters): a bare heading
    (`ERROR:`) gives way to the line after it; a failure with no error line (its first line would
    stand in) and a numbered line of a file listing (a read or an edit's
    echo quoting `error:` in code) are no error."""
    error = _error_of(result, call)
    if error is None:
        return None
    error = error.removesuffix("...").strip()
    if "Traceback (most recent call last)" in result.content and not _EXCEPTION.match(error):
        # A test runner's tally after the traceback (`1 failed`) says less than the exception.
        tail = result.content.rsplit("Traceback (most recent call last)", 1)[1].splitlines()
        raised = [ln.strip() for ln in tail if _EXCEPTION.match(ln.strip())]
        error = raised[-1] if raised else error
    if error.endswith(":") and len(error.split()) <= 2:
        lines = [ln.strip() for ln in result.content.splitlines() if ln.strip()]
        at = lines.index(error) if error in lines else -1
        error = lines[at + 1] if 0 <= at < len(lines) - 1 else error
    if not _ERROR_SHAPE.search(error) or _LISTING_LINE.match(error):
        return None
    return error[:ERROR_LINE_CHARS].rstrip()


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


PLAN_MARK = "plan"
"""A pending item from the agent's plan tool ends with `(plan: <status>)`: an update of the summary
that sees no new plan call keeps these, as the plan still stands."""
_PLAN_ITEM = re.compile(rf" \({PLAN_MARK}: [\w -]+\)$")


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


FOCUS = "Focus"
"""The heading `ExtractiveSummarizer` records a manual compaction's focus under, before the task."""

# Words a focus is made of whatever it is about: they would match everything.
_FOCUS_FILLER = frozenset(
    re.findall(
        r"\S+",
        "the and for with from that this these those keep details detail about into what which also all "
        "any are was were its their them then than there have has had not but our your you focus only "
        "please make sure everything",
    )
)


def focus_terms(focus: str | None) -> tuple[str, ...]:
    """The words of a focus that tell its content from the rest (lower case, 3 characters or more,
    common words left out): `"keep the details of the auth refactor"` gives `("auth", "refactor")`."""
    if not focus:
        return ()
    words = re.findall(r"[a-z0-9_][a-z0-9_./-]{2,}", focus.lower())
    return tuple(dict.fromkeys(w for w in words if w not in _FOCUS_FILLER))


def _about(item: str, terms: tuple[str, ...]) -> bool:
    low = item.lower()
    return any(term in low for term in terms)


def _focus_first(items: list[str], terms: tuple[str, ...], limit: int | None = None) -> list[str]:
    """`items` about the focus first, then the others, each in their order; with `limit`, the latest
    of them, those about the focus kept first. Without terms: the latest `limit` items, in order."""
    if not terms:
        return items[-limit:] if limit is not None else items
    about = [item for item in items if _about(item, terms)]
    other = [item for item in items if not _about(item, terms)]
    if limit is not None:
        about = about[-limit:]
        room = limit - len(about)
        other = other[-room:] if room > 0 else []
    return [*about, *other]


@dataclass
class ExtractiveSummarizer:
    """The default summarizer: builds the structured sections from the messages, with no LLM.

    - task: the user's first request, as they wrote it (see `user_words`: not the instruction
      files, reminders or context a harness put in the same message);
    - user messages: every later message the user wrote, verbatim, within `max_user_chars` (past
      it the most recent stay whole and the older ones are shortened, never dropped; the heading
      says how many); see `user_messages`;
    - user constraints: the user's requirement sentences, verbatim (see `extract_constraints`),
      those the user messages do not already show;
    - decisions, done, pending: sentences of the assistant's text (never its thinking) with the
      matching cues, and the latest to-do list or plan a tool call wrote;
    - files touched: every file written or edited (as `file_reads` recognises changes: editor
      and write tools, patches, shell redirections, `sed -i`, ...), and the files read most
      recently;
    - open errors: error results and tracebacks not settled by a later run of the same call.

    A previous summary among the messages is updated: its sections are merged with the new ones.
    Deterministic: the same messages give the same text.

    Given a `focus` (a manual compaction's, `Pipeline.compact(focus=...)`), it is recorded under
    `## Focus`, and in the decisions, files, done, pending and open errors the items that mention
    its words (`focus_terms`) come first and are kept before the others when a section is full.

    Example:
        ```python
        from historykit.processors import ExtractiveSummarizer

        text = ExtractiveSummarizer()(messages)
        ```
    """

    max_items: int = 6
    """Bullets kept in each of decisions, done and pending (the latest win; pending keeps every open
    item of the agent's latest plan, and sentences fill what room is left)."""
    max_item_chars: int = 200
    """Longer sentences are clipped (constraints are never clipped: longer ones are skipped)."""
    max_files: int = 25
    """Files listed: every file written or edited, and the most recently read ones up to this many."""
    max_errors: int = 5
    """Open errors listed (the latest win)."""
    max_constraint_chars: int = 2_000
    """Room for verbatim constraints; past it, the latest constraints win."""
    max_user_chars: int = USER_MESSAGE_CHARS
    """Room for the user's messages after the first; past it, the older ones are shortened."""
    shortened_chars: int = SHORTENED_CHARS
    """Length an older user message is shortened to when they do not all fit."""
    task_chars: int = 1_000
    """Longer first requests are shortened in the task section when the message itself stays
    verbatim at the start of the history (else they get the room of `max_user_chars`)."""
    model_name: str | None = field(default=None, init=False)
    """No model: the compaction marker records `None`."""

    def __call__(self, messages: Sequence[Message], focus: str | None = None) -> str:
        terms = focus_terms(focus)
        previous: dict[str, list[str]] = {}
        for msg in messages:
            for part in msg.parts:
                if isinstance(part, SummaryPart):
                    previous = parse_sections(part.text)
        said = user_messages(messages, self.max_user_chars, self.shortened_chars)
        # The first request whole, unless it stays verbatim at the start of the history anyway.
        room = self.task_chars if said.task_in_head else max(self.task_chars, self.max_user_chars)
        task = section(previous, TASK) or ([_shorten(said.task, room)] if said.task else [])
        whole = [m for m in [*task, *said.messages] if not _SHORTENED.search(m)]
        sections: dict[str, list[str]] = {
            TASK: task,
            USER_MESSAGES: said.messages,
            # A constraint the user's messages already show verbatim is not written twice.
            CONSTRAINTS: [
                c
                for c in extract_constraints(messages, self.max_constraint_chars)
                if not any(c in m for m in whole)
            ],
            FILES: _focus_first(
                _merge_files(
                    section(previous, FILES),
                    [p for m in messages for p in m.parts if isinstance(p, ToolCallPart)],
                    self.max_files,
                ),
                terms,
            ),
            ERRORS: _focus_first(_open_errors(section(previous, ERRORS), messages, self.max_errors), terms),
        }
        decisions, done, pending, planned = self._progress(messages)
        limit = self.max_items
        sections[DECISIONS] = _focus_first(_dedupe([*section(previous, DECISIONS), *decisions]), terms, limit)
        sections[DONE] = _focus_first(_dedupe([*section(previous, DONE), *done]), terms, limit)
        earlier = [item for item in section(previous, PENDING) if not _PLAN_ITEM.search(item)]
        if planned is None:
            # No plan call since the previous summary: its plan is still the plan, whatever
            # sentences came since (they fill the room the plan leaves).
            planned = [item for item in section(previous, PENDING) if _PLAN_ITEM.search(item)]
        room = max(0, limit - len(planned))
        sentences = _focus_first(pending or earlier, terms, room) if room else []
        sections[PENDING] = [*_focus_first(planned, terms), *sentences]
        text = _render(sections, {USER_MESSAGES: said.heading()})
        return f"## {FOCUS}\n{_bullet(focus)}\n\n{text}" if focus else text

    def _progress(
        self, messages: Sequence[Message]
    ) -> tuple[list[str], list[str], list[str], list[str] | None]:
        """Decisions, done and pending sentences, and the open items of the latest plan call among
        `messages` (`None`: no plan call)."""
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
        planned: list[str] | None = None
        if plan is not None:
            done.extend(_clip(text, clip) for text, status in plan if status == "completed")
            planned = _dedupe(
                [
                    f"{_clip(text, clip)} ({PLAN_MARK}: {status or 'open'})"
                    for text, status in plan
                    if status != "completed"
                ]
            )
            if planned:
                pending = []  # the plan says what is left better than passing sentences
        return _dedupe(decisions), _dedupe(done), _dedupe(pending), planned


def complete_summary(text: str, inputs: Sequence[Message], summarizer: object = None) -> str:
    """`text` (any summarizer's) with what every summary must keep added where it is missing.

    Checked after the fact, as an LLM may leave things out: the user's constraint sentences and
    messages verbatim (within the room `summarizer` states by its `max_constraint_chars` and
    `max_user_chars`, else the defaults), and every file written or edited.
    """
    chars = getattr(summarizer, "max_user_chars", None)
    short = getattr(summarizer, "shortened_chars", None)
    said = user_messages(
        inputs,
        chars if isinstance(chars, int) else USER_MESSAGE_CHARS,
        short if isinstance(short, int) else SHORTENED_CHARS,
    )
    flat = _flat(text)
    # A task kept verbatim at the start of the history need not be repeated word for word.
    wanted = [*([said.task] if said.task and not said.task_in_head else []), *said.messages]
    text = ensure_items(text, said.heading(), [m for m in wanted if _flat(m) not in flat])
    # After the messages: a constraint a message already shows verbatim is not written twice.
    room = getattr(summarizer, "max_constraint_chars", None)
    constraints = extract_constraints(inputs, room) if isinstance(room, int) else extract_constraints(inputs)
    text = ensure_constraints(text, constraints)
    previous = [p for m in inputs for p in m.parts if isinstance(p, SummaryPart)]
    earlier_files = section(parse_sections(previous[-1].text), FILES) if previous else []
    calls = [p for m in inputs for p in m.parts if isinstance(p, ToolCallPart)]
    missing = [f"{path} (edited)" for path in _changed_files(earlier_files, calls) if path not in text]
    return ensure_items(text, FILES, missing)


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


def summary_prompt(messages: Sequence[Message], focus: str | None = None) -> str:
    """The prompt a summarizing model is sent: the request, the focus if any, and the transcript."""
    asked = f"{FOCUS_INSTRUCTIONS.format(focus=focus)}\n\n" if focus else ""
    return f"Summarize this conversation.\n\n{asked}" + render_transcript(messages)


# --- LLM adapters ---------------------------------------------------------------------------------


class UnusableSummarizerError(InvalidArgumentError):
    """A summarizer that cannot work as configured: an unknown model name, a provider package that is
    not installed, a model the provider does not know, a missing API key.

    `Summarize` raises it from the call at once: it is never retried, and never replaced by a
    truncation (which would hide it). A summarizer of your own raises it for the same effect.

    Example:
        ```python
        from historykit.processors import UnusableSummarizerError

        async def my_summarizer(messages):
            if API_KEY is None:
                raise UnusableSummarizerError("my_summarizer: set MY_API_KEY")
            ...
        ```
    """


def summarizer_for(model: Any, budget_tokens: int = 2_000) -> Summarizer:
    """The summarizer for a framework's model: a Pydantic AI model name / `Model` / `Agent`, a
    LangChain chat model, or a model of any registered framework (`historykit.plugins.frameworks`).

    Raises `TypeError` naming the type of anything else.
    """
    for framework in frameworks():
        made = framework.summarizer(model, budget_tokens)
        if made is not None:
            return made
    raise ArgumentTypeError(
        f"model must be a Pydantic AI model name, Model or Agent, or a LangChain chat model; got a "
        f"{type(model).__module__}.{type(model).__qualname__} (pass any callable as summarizer= instead)"
    )
