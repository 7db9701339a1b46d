"""Probes from a transcript, extracted deterministically: the same transcript gives the same probes.

`extract_probes(messages)` reads a neutral history (any transcript format reads into one:
`historykit.formats.read_transcript`) and finds four kinds of probe (`historykit.evaluation.Probe`):

**recall**: facts the user stated or a tool returned that the agent later relied on. A candidate is
a path (`a/b.py`, `/etc/hosts`: a `/` and an extension, or a leading `/`), an identifier with an
underscore, a dot path or inner capitals (`parse_args`, `os.path.join`, `TokenCounter`), a number
of 3 digits or more (`8080`, `1.25` is not: it needs 3 digits before any dot) or a hex string of
7 to 40 digits (a commit, a hash). A candidate becomes a probe when the first message naming it is
a tool result or the user's own words (`historykit.processors._summarizers.user_words`), and a later
assistant message names it in its text or its tool-call arguments. Answer: the candidate.
From: the source message; to the end of the session.

**artifacts**: every file created or edited (`historykit.processors._file_reads.file_accesses`: the
write and edit tools of Claude Code, Codex `apply_patch`, SWE-agent and OpenHands editors, shell
redirections, `sed -i`, `tee`...), with its latest change: the longest line of the new text the
call wrote (`new_string`, `content`, `new_str`, `file_text`, the `+` lines of a patch; for a shell
command, the command), without the lines an edit only kept for context (those of its `old_string`),
cut to 80 characters. Answer: the path and that line (the path as the call wrote it). A call whose
result is an error is no change. From: the call; until the next change of the same file.

**continuation**: the current request (each message in the user's own words, its first 120
characters, until the user's next message) and the open items of the plan (each item of a Claude
Code `TodoWrite` or Codex `update_plan` call whose status is not `completed`, until the next plan
call).

**decisions**: each error the agent met (a tool result the extractive summarizer counts as an error,
`Traceback` last line, a failing exit status, an `...Error:` line; searches and successful reads
excluded), when its line reads as an error (an `Error`, `Exception`, `error:`, `FAILED`, `not
found`, `is required`... line; not a numbered line of a file listing; a bare `ERROR:` heading gives
way to the line after it; after a traceback, the exception line rather than a test runner's tally
such as `1 failed`: `historykit.processors._summarizers.error_line`, the line cleared placeholders
keep), and what it did next: the next assistant message's first tool call (its
shell command or first argument, first line, 80 characters), or its first sentence when it called
no tool. Answer: the error line (100 characters) and that action. From: the next assistant
message; to the end.

Known misses, measured in `docs/quality.md`: a fact the agent used under another spelling (a
relative path for an absolute one, a value it computed from a number it read) is no probe; a
candidate first seen inside a longer token (`a.py` inside `x/a.py`) counts as new where it is first
extracted on its own; facts in prose (a version string such as `3.11`, a flag such as `--force`, a
sentence the user wrote) are not recall candidates (the user's words are continuation probes); a
file changed by a script the agent wrote (`python fix.py`) is not an artifact (a `cp`/`mv` source,
which the shared recogniser counts as written, is left out here); a harness message in the user's role (an
OpenHands tool-parameter error) counts as a new request; a failure whose output has no error line
is no decision probe; an error the agent's next message does not address still gets that message
as its "decision".

Example:
    ```python
    from historykit.evaluation import extract_probes
    from historykit.formats import read_transcript

    probes = extract_probes(read_transcript("session.jsonl").messages)
    [p.question for p in probes if p.kind == "artifacts"]
    ```
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from historykit._messages import Message, TextPart, ToolCallPart, ToolResultPart
from historykit.evaluation._matching import message_text, normalise
from historykit.evaluation._probes import Probe
from historykit.processors._change_records import change_line
from historykit.processors._file_reads import FileWrite, file_accesses, shell_text
from historykit.processors._summarizers import _plan_items, error_line, user_words

_CANDIDATE = re.compile(
    r"(?<![\w/.~-])(?:"
    r"(?:~|\.{1,2})?/?(?:[\w@+-][\w.@+-]*/)+[\w@+-][\w.@+-]*\.\w{1,8}"  # a path with an extension
    r"|/(?:[\w@+-][\w.@+-]*/)*[\w@+-][\w.@+-]{2,}"  # an absolute path
    r"|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*){2,}"  # a dotted name: os.path.join
    r"|[A-Za-z][a-z0-9]*_\w+"  # snake_case (an underscore inside)
    r"|[A-Z][a-z0-9]+[A-Z]\w*"  # CamelCase
    r"|(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}"  # a hash
    r"|\d{3,}(?:\.\d+)?"  # a number of 3 digits or more
    r")(?![\w/])"
)
"""A recall candidate (see the module docstring); a trailing `.` of a sentence is not part of it."""
_MIN_CANDIDATE = 4
REQUEST_CHARS = 120
"""How much of a user message a continuation probe asks for: its beginning, whitespace collapsed."""
ACTION_CHARS = 80
_DONE = frozenset({"completed", "complete", "done"})
_SENTENCE = re.compile(r"(?<=[.!?:])\s")


def extract_probes(messages: Sequence[Message]) -> list[Probe]:
    """Every probe of the four kinds in `messages`, ordered by where each starts to be scored."""
    probes = [
        *_recall(messages),
        *_artifacts(messages),
        *_continuation(messages),
        *_decisions(messages),
    ]
    unique = {(p.kind, p.needles, p.appeared, p.until): p for p in probes}
    return sorted(unique.values(), key=lambda p: (p.appeared, p.source))


# --- recall -------------------------------------------------------------------------------------


def _candidates(text: str) -> set[str]:
    return {m.rstrip(".") for m in _CANDIDATE.findall(text) if len(m.rstrip(".")) >= _MIN_CANDIDATE}


def _source_text(message: Message) -> str | None:
    """The text of `message` a fact may come from: a tool's output or the user's own words."""
    results = [p.content for p in message.parts if isinstance(p, ToolResultPart)]
    if results:
        return "\n".join(results)
    if message.role == "user":
        return user_words(message)
    return None


def _acting_text(message: Message) -> str:
    """What an assistant message says and does (its text and tool calls; not its thinking)."""
    calls = [p for p in message.parts if isinstance(p, ToolCallPart)]
    texts = [p.text for p in message.parts if isinstance(p, TextPart)]
    return "\n".join([*texts, message_text(Message("assistant", tuple(calls)))])


def _recall(messages: Sequence[Message]) -> Iterator[Probe]:
    first: dict[str, int] = {}
    sourced: set[str] = set()
    used: dict[str, int] = {}
    for index, msg in enumerate(messages):
        if msg.role == "assistant":
            for token in _candidates(_acting_text(msg)):
                if token in sourced and token not in used:
                    used[token] = index
                first.setdefault(token, index)
            continue
        source = _source_text(msg)
        # Harness-injected text (a system reminder) is seen, never a source.
        for token in _candidates(message_text(msg)):
            if token not in first:
                first[token] = index
                if source is not None and token in source:
                    sourced.add(token)
    for token, at in sorted(used.items(), key=lambda kv: (first[kv[0]], kv[0])):
        origin = first[token]
        told = any(isinstance(p, ToolResultPart) for p in messages[origin].parts)
        role = "a tool result" if told else "the user"
        yield Probe(
            "recall",
            (token,),
            appeared=origin,
            source=origin,
            question=f"Which value did {role} give at message {origin} that the agent used at "
            f"message {at}? ({token})",
        )


# --- artifacts ----------------------------------------------------------------------------------


def _results_by_call(messages: Sequence[Message]) -> dict[str, ToolResultPart]:
    return {p.tool_call_id: p for m in messages for p in m.parts if isinstance(p, ToolResultPart)}


def _artifacts(messages: Sequence[Message]) -> Iterator[Probe]:
    located = [(i, p) for i, m in enumerate(messages) for p in m.parts if isinstance(p, ToolCallPart)]
    results = _results_by_call(messages)
    latest: dict[str, Probe] = {}
    done: list[Probe] = []
    for (index, call), access in zip(located, file_accesses([c for _, c in located])):
        if not isinstance(access, FileWrite):
            continue
        result = results.get(call.id)
        if result is not None and (result.is_error or "<tool_use_error>" in result.content[:200]):
            continue
        line = change_line(call)
        written = normalise(message_text(Message("assistant", (call,))))
        sources = _copy_sources(call)
        for resolved in access.paths:
            path = _as_written(resolved, written)
            if path in sources or path in {src.rsplit("/", 1)[-1] for src in sources}:
                continue  # `cp a.py b/` reads a.py (the recogniser also names b/a.py, b a directory)
            earlier = latest.pop(resolved, None)
            if earlier is not None and earlier.appeared < index:  # else: two edits in one message
                done.append(_superseded(earlier, index))
            needles = (path, line) if line else (path,)
            latest[resolved] = Probe(
                "artifacts",
                needles,
                appeared=index,
                source=index,
                question=f"What was the latest change to {path} (message {index})?",
            )
    yield from done
    yield from latest.values()


_COMMANDS = re.compile(r"&&|\|\||;|\||\n")


def _copy_sources(call: ToolCallPart) -> set[str]:
    """The files a shell `cp`/`mv` in the call copies from (every operand but the last), which
    `file_accesses` counts as written too."""
    script = shell_text(call)
    sources: set[str] = set()
    for command in _COMMANDS.split(script or ""):
        words = [w.strip("'\"") for w in command.split() if not w.startswith("-")]
        if len(words) > 2 and words[0] in ("cp", "mv"):
            sources.update(words[1:-1])
    return sources


def _as_written(path: str, text: str) -> str:
    """The longest tail of `path` the call's text names (`cd /testbed && ... > patch.txt` resolves to
    `/testbed/patch.txt`, which no message says): its own words are what a view can hold."""
    parts = path.split("/")
    for start in range(len(parts)):
        tail = "/".join(parts[start:])
        if tail and normalise(tail) in text:
            return tail
    return path


def _superseded(probe: Probe, at: int) -> Probe:
    return Probe(probe.kind, probe.needles, probe.appeared, probe.source, probe.question, until=at)


# --- continuation -------------------------------------------------------------------------------


def _continuation(messages: Sequence[Message]) -> Iterator[Probe]:
    requests = [(i, words) for i, m in enumerate(messages) if (words := user_words(m)) is not None]
    for (index, words), following in zip(requests, [*requests[1:], None]):
        yield Probe(
            "continuation",
            (" ".join(words.split())[:REQUEST_CHARS].rstrip(),),
            appeared=index,
            source=index,
            question=f"What is the user's current request (message {index})?",
            until=following[0] if following else None,
        )
    plans = [
        (i, items)
        for i, m in enumerate(messages)
        for p in m.parts
        if isinstance(p, ToolCallPart) and (items := _plan_items(p)) is not None
    ]
    for (index, items), next_plan in zip(plans, [*plans[1:], None]):
        for text, status in items:
            if status.lower() in _DONE or not text.strip():
                continue
            yield Probe(
                "continuation",
                (" ".join(text.split())[:REQUEST_CHARS].rstrip(),),
                appeared=index,
                source=index,
                question=f"Which plan items are still open (the plan of message {index})?",
                until=next_plan[0] if next_plan else None,
            )


# --- decisions ----------------------------------------------------------------------------------


def _action(message: Message) -> str | None:
    """What an assistant message did: its first tool call's command or argument, else its first sentence."""
    for part in message.parts:
        if isinstance(part, ToolCallPart):
            detail = shell_text(part)
            if detail is None:
                detail = next(
                    (v for v in part.arguments_dict().values() if isinstance(v, str) and v.strip()), None
                )
            if detail is None:
                return part.name
            line = next((ln.strip() for ln in detail.splitlines() if ln.strip()), "")
            return line[:ACTION_CHARS].rstrip() or part.name
    text = " ".join(message.text.split())
    sentence = _SENTENCE.split(text, maxsplit=1)[0] if text else ""
    return sentence[:ACTION_CHARS].rstrip() or None


def _decisions(messages: Sequence[Message]) -> Iterator[Probe]:
    calls: dict[str, ToolCallPart] = {}
    for index, msg in enumerate(messages):
        for part in msg.parts:
            if isinstance(part, ToolCallPart):
                calls[part.id] = part
                continue
            if not isinstance(part, ToolResultPart):
                continue
            error = error_line(part, calls.get(part.tool_call_id))
            if error is None:
                continue
            if normalise(error) not in normalise(part.content):
                continue  # a status the summarizer words itself ("exit status 1"), not the output's
            after = next(
                (k for k in range(index + 1, len(messages)) if messages[k].role == "assistant"), None
            )
            action = _action(messages[after]) if after is not None else None
            if after is None or action is None:
                continue
            yield Probe(
                "decisions",
                (error, action),
                appeared=after,
                source=index,
                question=f"Which error did the agent meet at message {index}, and what did it do "
                f"about it (message {after})?",
            )
