"""Small hand-built transcripts whose probes are known, shared by the evaluation tests."""

from __future__ import annotations

from dataclasses import replace

from historykit._messages import Message, TextPart, ToolCallPart, ToolResultPart
from historykit._pipeline import HistoryProcessor, ProcessContext, StepNotes

SECRET = "config/settings_prod.yaml"
"""A path a tool returns and the agent then uses: the recall probe of `session`."""
ERROR = "KeyError: 'database_url'"
FRAMES = "\n".join(f'  File "lib/layer_{n}.py", line {n}, in call\n    return inner()' for n in range(40))
"""A traceback long enough to be worth clearing even behind a recall placeholder."""


def padding(n: int) -> str:
    """A long, fact-free tool output (no recall candidate in it)."""
    return "\n".join("lorem ipsum dolor sit amet consectetur" for _ in range(n))


def session(rounds: int = 6) -> list[Message]:
    """A small coding session: a search finds `SECRET`, the agent reads it, writes and edits a
    file, meets `ERROR` and reruns the tests; then `rounds` rounds of bulky listings follow."""
    messages = [
        Message.system("You are a coding agent."),
        Message.user("Please fix the crash when the server starts in production."),
        Message.assistant("Searching.", [ToolCallPart("c1", "Grep", {"pattern": "settings"})]),
        Message("tool", (ToolResultPart("c1", "Grep", f"Found 1 file\n{SECRET}"),)),
        Message.assistant("Reading it.", [ToolCallPart("c2", "Read", {"file_path": SECRET})]),
        Message("tool", (ToolResultPart("c2", "Read", "database: postgres\n" + padding(20)),)),
        Message.assistant(
            "",
            [
                ToolCallPart(
                    "c3",
                    "Write",
                    {"file_path": "app/boot.py", "content": "import os\nURL = os.environ['X']\n"},
                )
            ],
        ),
        Message("tool", (ToolResultPart("c3", "Write", "File created successfully at: app/boot.py"),)),
        Message.assistant(
            "",
            [
                ToolCallPart(
                    "c4",
                    "Edit",
                    {
                        "file_path": "app/boot.py",
                        "old_string": "URL = os.environ['X']",
                        "new_string": "URL = settings.get('database_url')",
                    },
                )
            ],
        ),
        Message("tool", (ToolResultPart("c4", "Edit", "The file app/boot.py has been updated."),)),
        Message.assistant(
            "Running the tests.", [ToolCallPart("c5", "Bash", {"command": "pytest tests/test_boot.py"})]
        ),
        Message(
            "tool",
            (
                ToolResultPart(
                    "c5", "Bash", f"Exit code 1\nTraceback (most recent call last):\n{FRAMES}\n{ERROR}"
                ),
            ),
        ),
        Message.assistant(
            "The key is missing.", [ToolCallPart("c6", "Bash", {"command": "grep -n database_url config"})]
        ),
        Message("tool", (ToolResultPart("c6", "Bash", "no match"),)),
    ]
    for n in range(rounds):
        messages += [
            Message.assistant(f"Listing {n}.", [ToolCallPart(f"l{n}", "Bash", {"command": f"ls -R dir{n}"})]),
            Message("tool", (ToolResultPart(f"l{n}", "Bash", padding(150)),)),
        ]
    messages.append(Message.assistant("Done."))
    return messages


class ForgetSecret(HistoryProcessor):
    """Replaces every tool output naming `SECRET` (and the calls naming it) by a bare notice: a
    compaction that loses that fact and nothing the other probes need."""

    def process(self, messages: list[Message], ctx: ProcessContext) -> tuple[list[Message], StepNotes]:
        out = []
        notes = StepNotes()
        for msg in messages:
            parts = tuple(
                replace(p, content="[output removed]")
                if isinstance(p, ToolResultPart) and SECRET in p.content
                else p
                for p in msg.parts
            )
            if msg.role == "assistant" and any(SECRET in str(getattr(p, "arguments", "")) for p in parts):
                # The call that used it goes too (its result with it: Repair drops the orphan).
                parts = (TextPart("(a call)"),)
            if parts != msg.parts:
                notes.replaced += 1
                msg = replace(msg, parts=parts)
            out.append(msg)
        return out, notes
