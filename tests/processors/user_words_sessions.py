"""Generated coding sessions of many short user requests, and what the model still sees of them.

`build_session(seed, shape)` makes a session as a coding agent records it: a long instruction file
pasted into the first message (Codex's "# AGENTS.md instructions" block or Claude Code's CLAUDE.md
`<system-reminder>`), environment context, then many short requests, some with a reminder
appended, each followed by a few tool exchanges that read, edit and write files in the shapes agents
use (Edit, Write, MultiEdit, `apply_patch`, `str_replace_editor create|str_replace`, shell
redirections, `sed -i`) and run tests; optionally an earlier compaction summary (Claude Code's
"This session is being continued ...") midway.

`last_view(session, pipeline, window, counter)` replays it call by call in persistent mode (each
call's output carried forward) and returns what the last call sends; `visibility(session, sent)`
says how many of the user's messages (`user_words`) and of the files written or edited
(`file_accesses`) the model still sees there: a message is seen when its words are in the text of
a message sent (whitespace aside), or shortened when only its head is; a file when its path is in
the text or a tool call sent writes it. Tool output is not counted.

The benchmark `benchmarks/bench_user_words.py` and `tests/processors/test_user_words.py` share it.

Example:
    ```python
    import historykit
    from historykit._tokens import TokenCounter

    session = build_session(7, SessionShape(requests=40))
    sent = last_view(session, historykit.default_pipeline(), 32_000, TokenCounter())
    print(visibility(session, sent))
    ```
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from historykit._messages import Message, SummaryPart, TextPart, ToolCallPart, ToolResultPart
from historykit._pipeline import HistoryProcessor, ProcessContext
from historykit._tokens import TokenCounter
from historykit.processors._file_reads import FileWrite, file_accesses
from historykit.processors._summarizers import user_words


@dataclass(frozen=True)
class SessionShape:
    """What a generated session is made of."""

    requests: int = 40
    """Short user requests after the first one."""
    style: Literal["codex", "claude"] = "claude"
    """How the instruction file and context are injected (and how shell calls look)."""
    instruction_chars: int = 6_000
    """Length of the instruction file pasted into the first message."""
    steps: tuple[int, int] = (1, 4)
    """Tool exchanges after each request (inclusive range)."""
    file_lines: tuple[int, int] = (30, 140)
    """Lines of a file read (inclusive range)."""
    write_lines: tuple[int, int] = (5, 60)
    """Lines a write or an edit puts in a file (inclusive range): tool arguments are not cleared."""
    reminder_share: float = 0.3
    """Share of requests that carry a `<system-reminder>` block."""
    earlier_summary: bool = True
    """An agent's own earlier compaction summary midway."""


_VERBS = ("Rename", "Move", "Split", "Inline", "Document", "Test", "Type-annotate", "Simplify")
_ASKS = (
    "{verb} `{name}` in {path}.",
    "Now {lverb} `{name}`; keep the public API as it is.",
    "Don't touch {path}. Only change {other}.",
    "Why does `{name}` return None when the list is empty?",
    "Run the tests again and tell me what fails.",
    "ok, {lverb} `{name}` too",
    "Two things:\n- {verb} `{name}` in {path}\n- then update the changelog",
    "That's wrong: `{name}` must not raise on empty input. Fix it.",
    "Use pathlib in {path}, not os.path.",
    "Add a regression test for `{name}`.",
)


_WHY = (
    "The old code swallowed the error, so the caller never saw it.",
    "This keeps the public signature unchanged.",
    "I am moving the parsing into its own function so the test can call it directly.",
    "The loop was quadratic on long inputs; a dict lookup fixes that.",
    "Renaming it everywhere it is imported, including the tests.",
    "The fixture was shared between tests and leaked state.",
)


def _instructions(rng: random.Random, chars: int) -> str:
    rules = [
        "You must run `make lint` before every commit.",
        "Never edit generated files under build/.",
        "Always write type hints.",
        "Only use the standard library unless a dependency is listed in pyproject.toml.",
        "Do not push to main; open a branch.",
        "Tests must not touch the network.",
        "Comments must say why, not what.",
        "Prefer small commits with messages that say what and why.",
    ]
    lines = ["# Project conventions", ""]
    while sum(len(line) + 1 for line in lines) < chars:
        lines.append(f"- {rng.choice(rules)} (section {len(lines)})")
    return "\n".join(lines)


def _file_text(rng: random.Random, path: str, lines: int) -> str:
    return "\n".join(
        f"{n:>6}\tvalue_{n} = compute({n}, {path!r})  # {rng.random():.6f}" for n in range(1, lines + 1)
    )


def _first_message(rng: random.Random, shape: SessionShape, request: str) -> Message:
    instructions = _instructions(rng, shape.instruction_chars)
    if shape.style == "codex":
        text = (
            f"# AGENTS.md instructions for /repo\n\n<INSTRUCTIONS>\n{instructions}\n</INSTRUCTIONS>\n\n"
            "<environment_context>\n  <cwd>/repo</cwd>\n  <approval_policy>never</approval_policy>\n"
            "  <sandbox_mode>workspace-write</sandbox_mode>\n  <shell>bash</shell>\n"
            "</environment_context>\n\n"
            f"{request}"
        )
    else:
        text = (
            "<system-reminder>\nAs you answer the user's questions, you can use the following context:\n"
            "# claudeMd\nCodebase and user instructions are shown below. Be sure to adhere to these "
            "instructions.\n\nContents of /repo/CLAUDE.md (project instructions, checked into the "
            f"codebase):\n\n{instructions}\n</system-reminder>\n{request}"
        )
    return Message.user(text)


@dataclass
class _Agent:
    """Emits the tool exchanges of one session, in the shapes of its style."""

    rng: random.Random
    shape: SessionShape
    paths: list[str]
    calls: int = 0
    messages: list[Message] = field(default_factory=list)

    def call(self, text: str, name: str, arguments: dict[str, object] | str, result: str) -> None:
        self.calls += 1
        cid = f"call_{self.calls}"
        self.messages.append(Message("assistant", (TextPart(text), ToolCallPart(cid, name, arguments))))
        self.messages.append(Message("tool", (ToolResultPart(cid, name, result),)))

    def shell(self, text: str, command: str, result: str) -> None:
        if self.shape.style == "codex":
            self.call(text, "shell", {"command": ["bash", "-lc", command], "workdir": "/repo"}, result)
        else:
            self.call(text, "Bash", {"command": command, "description": text}, result)

    def read(self, path: str) -> None:
        body = _file_text(self.rng, path, self.rng.randint(*self.shape.file_lines))
        if self.shape.style == "codex":
            self.shell(f"Reading {path}.", f"sed -n '1,400p' {path}", body)
        else:
            self.call(f"Reading {path}.", "Read", {"file_path": f"/repo/{path}"}, body)

    def change(self, path: str) -> None:
        """One write or edit of `path`, in one of the shapes agents use."""
        snippet = _file_text(self.rng, path, self.rng.randint(*self.shape.write_lines)) + "\n"
        edit = {"old_string": snippet[: len(snippet) // 3], "new_string": snippet}
        shapes = ["edit", "write", "multiedit", "editor_create", "editor_replace", "patch", "redirect", "sed"]
        how = self.rng.choice(shapes)
        said = f"Updating {path}: " + " ".join(self.rng.choices(_WHY, k=self.rng.randint(1, 4)))
        if how == "edit":
            self.call(said, "Edit", {"file_path": f"/repo/{path}", **edit}, "ok")
        elif how == "write":
            self.call(said, "Write", {"file_path": f"/repo/{path}", "content": snippet}, "File created")
        elif how == "multiedit":
            edits = [edit, {"old_string": "c", "new_string": "d"}]
            self.call(said, "MultiEdit", {"file_path": f"/repo/{path}", "edits": edits}, "Applied 2 edits")
        elif how == "editor_create":
            arguments = {"command": "create", "path": f"/repo/{path}", "file_text": snippet}
            self.call(said, "str_replace_editor", arguments, f"File created successfully at: /repo/{path}")
        elif how == "editor_replace":
            arguments = {
                "command": "str_replace",
                "path": f"/repo/{path}",
                "old_str": edit["old_string"],
                "new_str": edit["new_string"],
            }
            self.call(said, "str_replace_editor", arguments, f"The file /repo/{path} has been edited.")
        elif how == "patch":
            added = "".join(f"+{line}\n" for line in snippet.splitlines())
            patch = f"*** Begin Patch\n*** Update File: {path}\n@@\n-x = 1\n{added}*** End Patch\n"
            if self.shape.style == "codex":
                self.call(said, "apply_patch", patch, "Success. Updated the following files:\nM " + path)
            else:
                self.shell(said, f"apply_patch <<'EOF'\n{patch}EOF", "Done!")
        elif how == "redirect":
            op = self.rng.choice([">", ">>"])
            self.shell(said, f"cat {op} {path} <<'EOF'\n{snippet}EOF", "")
        else:
            self.shell(said, f"sed -i 's/old_{self.calls}/new_{self.calls}/' {path}", "")

    def run_tests(self) -> None:
        failed = self.rng.random() < 0.3
        out = "\n".join(f"tests/test_{k}.py ....." for k in range(self.rng.randint(5, 30)))
        tail = (
            "FAILED tests/test_3.py::test_x - AssertionError\n1 failed, 40 passed" if failed else "41 passed"
        )
        self.shell("Running the tests.", "pytest -q", f"{out}\n{tail}")

    def step(self) -> None:
        roll = self.rng.random()
        if roll < 0.4:
            self.read(self.rng.choice(self.paths))
        elif roll < 0.8:
            self.change(self.rng.choice(self.paths))
        else:
            self.run_tests()


def _earlier_summary(requests: Sequence[str]) -> Message:
    listed = "\n".join(f'   - "{r}"' for r in requests)
    body = "\n".join(f"   - Modified `src/mod_{k}.py` to handle the edge case {k}." for k in range(60))
    return Message.user(
        "This session is being continued from a previous conversation that ran out of context. "
        "The summary below covers the earlier portion of the conversation.\n\nSummary:\n"
        f"1. Primary Request and Intent:\n   The user asked for a series of refactorings.\n\n"
        f"2. Files and Code Sections:\n{body}\n\n3. All user messages:\n{listed}\n\n"
        "4. Pending Tasks:\n   - Finish the refactoring.\n\n"
        "Please continue the conversation from where we left off without asking the user any "
        "further questions. Continue with the last task that you were asked to work on."
    )


def build_session(seed: int, shape: SessionShape = SessionShape()) -> list[Message]:
    """A generated session (deterministic for a seed); it ends with an assistant message."""
    rng = random.Random(seed)
    paths = [f"src/pkg_{p}/module_{m}.py" for p in range(6) for m in range(rng.randint(6, 11))]
    agent = _Agent(rng, shape, paths)
    history = [Message.system("You are a coding agent working in /repo.")]
    asked: list[str] = []
    first = f"Refactor the package layout of this repository (seed {seed}) and keep the tests green."
    history.append(_first_message(rng, shape, first))
    summary_at = shape.requests // 2 if shape.earlier_summary else -1
    for index in range(shape.requests + 1):
        if index:
            verb = rng.choice(_VERBS)
            request = rng.choice(_ASKS).format(
                verb=verb,
                lverb=verb.lower(),
                name=f"handler_{index}_{rng.randint(0, 999)}",
                path=rng.choice(paths),
                other=rng.choice(paths),
            )
            asked.append(request)
            if rng.random() < shape.reminder_share:
                request += (
                    "\n<system-reminder>\nThe TodoWrite tool hasn't been used recently. This is a "
                    "reminder; ignore it if not applicable.\n</system-reminder>"
                )
            history.append(Message.user(request))
        if index == summary_at:
            history.append(_earlier_summary(asked))
        agent.messages = []
        for _ in range(rng.randint(*shape.steps)):
            agent.step()
        history += agent.messages
        history.append(Message.assistant(f"Done with request {index}."))
    return history


# --- what the model still sees ------------------------------------------------------------------


def last_view(
    session: Sequence[Message],
    pipeline: HistoryProcessor,
    window: int,
    counter: TokenCounter,
    on_call: Callable[[list[Message], int], None] | None = None,
) -> list[Message]:
    """What the last model call of `session` sends, replayed call by call in persistent mode.

    `on_call(sent, t)` sees every call's input (`t`: the index of the assistant message it produced).
    """
    ctx = ProcessContext(window, "explicit", counter)
    points = [i for i, m in enumerate(session) if m.role == "assistant" and i > 0]
    carried: list[Message] = []
    previous = 0
    for t in points:
        carried, _ = pipeline.process([*carried, *session[previous:t]], ctx)
        if on_call is not None:
            on_call(carried, t)
        previous = t
    return carried


@dataclass
class Visibility:
    """The user's messages and the files changed in a session, and how many the model still sees."""

    user_messages: int = 0
    seen_whole: int = 0
    seen_shortened: int = 0
    """Messages of which only the head is seen (shortened to fit a summary's budget)."""
    files_changed: int = 0
    files_seen: int = 0
    missing_messages: list[str] = field(default_factory=list)
    missing_files: list[str] = field(default_factory=list)

    def __iadd__(self, other: Visibility) -> Visibility:
        for name in ("user_messages", "seen_whole", "seen_shortened", "files_changed", "files_seen"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.missing_messages += other.missing_messages
        self.missing_files += other.missing_files
        return self


def _flat(text: str) -> str:
    return " ".join(text.split())


def visibility(session: Sequence[Message], sent: Sequence[Message]) -> Visibility:
    """How much of `session`'s user messages and changed files `sent` still shows (see the module)."""
    texts: list[str] = []
    for msg in sent:
        for part in msg.parts:
            if isinstance(part, (TextPart, SummaryPart)):
                texts.append(part.text)
            elif isinstance(part, ToolCallPart):
                args = part.arguments
                texts.append(args if isinstance(args, str) else json.dumps(args, ensure_ascii=False))
                texts.append(part.arguments_text())
    blob = _flat("\n".join(texts))
    out = Visibility()
    said = list(dict.fromkeys(w for m in session if (w := user_words(m)) is not None))
    out.user_messages = len(said)
    for words in said:
        flat = _flat(words)
        if flat in blob:
            out.seen_whole += 1
        elif flat[:40] in blob:
            out.seen_shortened += 1
        else:
            out.missing_messages.append(words)
    session_calls = [p for m in session for p in m.parts if isinstance(p, ToolCallPart)]
    changed = list(
        dict.fromkeys(p for a in file_accesses(session_calls) if isinstance(a, FileWrite) for p in a.paths)
    )
    sent_calls = [p for m in sent for p in m.parts if isinstance(p, ToolCallPart)]
    written_in_view = {p for a in file_accesses(sent_calls) if isinstance(a, FileWrite) for p in a.paths}
    out.files_changed = len(changed)
    for path in changed:
        if path in written_in_view or path in blob:
            out.files_seen += 1
        else:
            out.missing_files.append(path)
    return out
