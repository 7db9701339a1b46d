"""`DedupeFileReads` and the file-read shapes it recognises: real corpus snippets, the path, range
and write rules, the corpus sessions against a brute-force oracle, and random histories."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from historykit._messages import Message, OtherPart, TextPart, ToolCallPart, ToolResultPart
from historykit._pipeline import Pipeline
from historykit._tokens import TokenCounter, heuristic_tokenizer
from historykit._validity import check_neutral, final_request_start
from historykit.processors._dedupe_file_reads import NOTICE_PREFIX, DedupeFileReads
from historykit.processors._file_reads import (
    FileRead,
    FileWrite,
    file_accesses,
    normalize_path,
    read_failed,
    read_is_partial,
    shown_extent,
)
from historykit.processors._trigger import Trigger

from ..conftest import CORPUS, corpus_paths
from ..strategies import examples, neutral_histories
from .support import (
    COUNTER,
    assert_idempotent,
    assert_in_place_edit_rules,
    context,
    file_reading_agent,
    replay_both_modes,
    tokens,
)

NOTICE_SLACK = 10
"""Tokens by which a notice may differ from the estimate the processor decides with."""


def eager(**config: Any) -> DedupeFileReads:
    """Deduplicates everything it can, at once: no trigger, no minimum batch."""
    return DedupeFileReads(trigger=None, min_gain=0, **config)


def file_text(name: str, lines: int = 80) -> str:
    return "\n".join(
        f"{n:6}\u2192    def step_{n}(self): return compute({n}, '{name}')" for n in range(1, lines + 1)
    )


def session(*steps: tuple[ToolCallPart, str]) -> list[Message]:
    """A system prompt, a task, then one assistant message per call, each answered right after."""
    history = [Message.system("You are a coding agent."), Message.user("Fix the failing test.")]
    for call, content in steps:
        history.append(Message("assistant", (TextPart(f"Step {call.id}."), call)))
        history.append(Message("tool", (ToolResultPart(call.id, call.name, content),)))
    return history


def read(call_id: str, path: str, **lines: int) -> ToolCallPart:
    return ToolCallPart(call_id, "Read", {"file_path": path, **lines})


def bash(call_id: str, command: str) -> ToolCallPart:
    return ToolCallPart(call_id, "bash", {"command": command})


def result(history: list[Message], call_id: str) -> ToolResultPart:
    return next(p for m in history for p in m.tool_results if p.tool_call_id == call_id)


def replaced_ids(before: list[Message], after: list[Message]) -> set[str]:
    return {
        p.tool_call_id
        for b, a in zip(before, after)
        for p, q in zip(b.parts, a.parts)
        if isinstance(p, ToolResultPart) and isinstance(q, ToolResultPart) and p.content != q.content
    }


def access(call: ToolCallPart, root: str | None = None) -> FileRead | FileWrite | None:
    return file_accesses([call], root=root)[0]


# --- recognising reads: the corpus's tool shapes -----------------------------------------------

SPOTTER = "/home/USER/projects/spotter-worktrees/spotter-gqc"
CODEX_DIR = "/home/user/projects/temp/chatbot-ui"
PONY = "/workspace/ponylang__ponyc__0.1"
CLAUDE_TASKS = "$TMPDIR/claude-1000/-home-USER-projects-spotter-worktrees-spotter-gqc/tasks"


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        # Claude Code `Read`: whole file, `offset` (1-based, as its results number lines) and `limit`.
        (read("toolu_01Jh", f"{SPOTTER}/test/test_helper.exs"), FileRead(f"{SPOTTER}/test/test_helper.exs")),
        (
            read("t", f"{SPOTTER}/test/spotter/transcripts/resources_test.exs", offset=193, limit=60),
            FileRead(f"{SPOTTER}/test/spotter/transcripts/resources_test.exs", 193, 252),
        ),
        (read("t", f"{SPOTTER}/mix.exs", limit=30), FileRead(f"{SPOTTER}/mix.exs", 1, 30)),
        (read("t", f"{SPOTTER}/lib/message.ex", offset=70), FileRead(f"{SPOTTER}/lib/message.ex", 70)),
        # Editor tools: `view`, with and without `view_range` (`-1`: to the end).
        (
            ToolCallPart(
                "toolu_12", "str_replace_editor", {"command": "view", "path": f"{PONY}/packages/cli/cli.pony"}
            ),
            FileRead(f"{PONY}/packages/cli/cli.pony"),
        ),
        (
            ToolCallPart(
                "t",
                "str_replace_editor",
                {"command": "view", "path": f"{PONY}/src/libponyc/expr/match.c", "view_range": [282, 449]},
            ),
            FileRead(f"{PONY}/src/libponyc/expr/match.c", 282, 449),
        ),
        (
            ToolCallPart(
                "t", "str_replace_editor", {"command": "view", "path": "cli.pony", "view_range": [100, -1]}
            ),
            FileRead("cli.pony", 100),
        ),
        (
            ToolCallPart(
                "t", "str_replace_editor", {"command": "view", "path": "cli.pony", "view_range": [1, -1]}
            ),
            FileRead("cli.pony"),
        ),
        # Shell reads as mini-swe-agent, Claude Code and Codex run them.
        (bash("t", "cat src/sqlfluff/core/file_helpers.py"), FileRead("src/sqlfluff/core/file_helpers.py")),
        (
            bash("t", "cd /testbed && sed -n '219,248p' astropy/modeling/separable.py"),
            FileRead("/testbed/astropy/modeling/separable.py", 219, 248),
        ),
        (
            bash("t", "cat /testbed/django/db/models/fields/related.py | sed -n '765,850p'"),
            FileRead("/testbed/django/db/models/fields/related.py", 765, 850),
        ),
        (
            bash("t", "cat /testbed/django/db/migrations/operations/fields.py | head -200"),
            FileRead("/testbed/django/db/migrations/operations/fields.py", 1, 200),
        ),
        (
            bash("t", "head -30 /testbed/src/marshmallow/marshalling.py"),
            FileRead("/testbed/src/marshmallow/marshalling.py", 1, 30),
        ),
        (
            ToolCallPart(
                "toolu_013r",
                "Bash",
                {
                    "command": f"tail -30 {CLAUDE_TASKS}/bd0afab.output",
                    "description": "Check test results",
                },
            ),
            FileRead(f"{CLAUDE_TASKS}/bd0afab.output", -30),
        ),
        (bash("t", "tail -n +40 src/app.py"), FileRead("src/app.py", 40)),
        (bash("t", "nl -ba src/app.py | sed -n '10,20p'"), FileRead("src/app.py", 10, 20)),
        (bash("t", "sed -n '120,$p' src/app.py"), FileRead("src/app.py", 120)),
        (bash("t", "sed -n '1,200p;200q' src/app.py"), FileRead("src/app.py", 1, 200)),
        (bash("t", "sed -n '30,80p' src/app.py | head -10"), FileRead("src/app.py", 30, 39)),
        (bash("t", "cat -n src/app.py 2>&1"), FileRead("src/app.py")),
        (bash("t", "cat src/app.py 2>/dev/null"), FileRead("src/app.py")),
        (bash("t", "sed -n 5p < src/app.py"), FileRead("src/app.py", 5, 5)),
        (
            ToolCallPart(
                "call_pRcv",
                "shell",
                {
                    "command": [
                        "bash",
                        "-lc",
                        "sed -n '200,240p' components/chat/chat-hooks/use-chat-handler.tsx",
                    ],
                    "workdir": CODEX_DIR,
                },
            ),
            FileRead(f"{CODEX_DIR}/components/chat/chat-hooks/use-chat-handler.tsx", 200, 240),
        ),
        (
            ToolCallPart(
                "t",
                "shell",
                {"command": ["bash", "-lc", "cat 'LM Studio configuration.md'"], "workdir": CODEX_DIR},
            ),
            FileRead(f"{CODEX_DIR}/LM Studio configuration.md"),
        ),
        # SWE-agent `open` and OpenHands `open_file` show a window whose extent the call does not state.
        (
            ToolCallPart(
                "call_5", "open", {"command": "open pydicom/pixel_data_handlers/numpy_handler.py 293"}
            ),
            FileRead("pydicom/pixel_data_handlers/numpy_handler.py", window="open at line 293"),
        ),
        (ToolCallPart("t", "open", {"path": "setup.py"}), FileRead("setup.py", window="open at the top")),
        (
            ToolCallPart("t", "open", {"path": "src/marshmallow/fields.py", "line_number": 1474}),
            FileRead("src/marshmallow/fields.py", window="open at line 1474"),
        ),
        (
            ToolCallPart("t", "execute_ipython_cell", {"code": "open_file('/workspace/src/App.css')"}),
            FileRead("/workspace/src/App.css", window="open_file at the top"),
        ),
    ],
)
def test_read_shapes(call: ToolCallPart, expected: FileRead) -> None:
    assert access(call) == expected


@pytest.mark.parametrize(
    ("call", "written"),
    [
        (
            ToolCallPart(
                "t",
                "Edit",
                {"file_path": "/p/a.ex", "old_string": "x", "new_string": "y", "replace_all": False},
            ),
            ("/p/a.ex",),
        ),
        (ToolCallPart("t", "Write", {"file_path": "/p/a.ex", "content": "x"}), ("/p/a.ex",)),
        (ToolCallPart("t", "MultiEdit", {"file_path": "/p/a.ex", "edits": []}), ("/p/a.ex",)),
        (
            ToolCallPart(
                "t",
                "str_replace_editor",
                {"command": "str_replace", "path": "/w/cli.pony", "old_str": "a", "new_str": "b"},
            ),
            ("/w/cli.pony",),
        ),
        (
            ToolCallPart(
                "t",
                "str_replace_editor",
                {"command": "insert", "path": "/w/m.c", "insert_line": 317, "new_str": "x"},
            ),
            ("/w/m.c",),
        ),
        (
            bash(
                "t",
                "cd /testbed && cat > reproduce.py << 'EOF'\nfrom marshmallow import Schema, fields\ncat "
                "'x'\nEOF",
            ),
            ("/testbed/reproduce.py",),
        ),
        (bash("t", "sed -i '17a import struct' pydicom/dataelem.py"), ("pydicom/dataelem.py",)),
        (
            bash("t", "cd /testbed && git diff astropy/modeling/separable.py > patch.txt && cat patch.txt"),
            ("/testbed/patch.txt",),
        ),
        (bash("t", "cat a.py > b.py"), ("b.py",)),
        (bash("t", "python run.py 2> err.log | tee out.log"), ("err.log", "out.log")),
        (bash("t", "mv src/old.py src/new.py"), ("src/old.py", "src/new.py", "src/new.py/old.py")),
        (
            ToolCallPart(
                "t",
                "shell",
                {
                    "command": [
                        "bash",
                        "-lc",
                        "apply_patch <<'PATCH'\n*** Begin Patch\n*** Update File: "
                        "components/chat/chat-helpers/index.ts\n@@\n-a\n+b\n*** End Patch\nPATCH",
                    ],
                    "workdir": CODEX_DIR,
                },
            ),
            (f"{CODEX_DIR}/components/chat/chat-helpers/index.ts",),
        ),
        (
            ToolCallPart(
                "t",
                "execute_ipython_cell",
                {
                    "code": "edit_file_by_replace(\n'/workspace/src/App.tsx',\n"
                    'to_replace="""a""",\nnew_content="""b""",\n)'
                },
            ),
            ("/workspace/src/App.tsx",),
        ),
    ],
)
def test_write_shapes(call: ToolCallPart, written: tuple[str, ...]) -> None:
    assert access(call) == FileWrite(written)


@pytest.mark.parametrize(
    "call",
    [
        # Output that is not the file's lines, or not one file's.
        bash("t", 'cat /testbed/django/db/models/fields/related.py | grep -n "to_field" | head -30'),
        bash("t", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && cat patch.txt"),
        bash("t", f'grep -n "iso" {PONY}/src/libponyc/expr/match.c'),
        bash("t", 'find /testbed -type f -name "*.py" | head -30'),
        bash(
            "t",
            "sed -n '486,550p' src/sqlfluff/core/linter/linted_file.py 2>/dev/null || "
            "sed -n '486,$p' src/sqlfluff/core/linter/linted_file.py",
        ),
        bash("t", "cat a.py b.py"),
        bash("t", "cat src/*.py"),
        bash("t", "cat a.py > /dev/null"),
        bash("t", "head -c 500 test/fixtures/transcripts/subagent.jsonl"),
        bash("t", "tail -f server.log"),
        bash("t", "sed -n '/def main/,/^$/p' src/app.py"),
        bash("t", "cd ~ && cat a.py"),
        bash("t", "cat 'unbalanced"),
        # Searches and listings take a path too.
        ToolCallPart("t", "Grep", {"glob": "*.ex", "path": "/p/lib", "pattern": "Annotation"}),
        ToolCallPart("t", "Glob", {"path": "/p", "pattern": "**/*.ex"}),
        ToolCallPart("t", "find_file", {"file_name": "fields.py", "dir": "src"}),
        ToolCallPart("t", "TodoWrite", {"todos": []}),
        ToolCallPart("t", "submit", {"command": "submit"}),
        ToolCallPart("t", "Read", "not json"),
    ],
)
def test_not_reads(call: ToolCallPart) -> None:
    assert not isinstance(access(call), FileRead)


def test_swe_agent_edit_changes_the_file_its_editor_has_open() -> None:
    text_actions = [
        ToolCallPart("call_1", "create", {"command": "create reproduce_bug.py"}),
        ToolCallPart("call_2", "edit", {"command": "edit 1:1\nimport numpy as np\nend_of_edit"}),
        ToolCallPart("call_5", "open", {"command": "open pydicom/pixel_data_handlers/numpy_handler.py 293"}),
        ToolCallPart("call_6", "edit", {"command": "edit 287:295\n    required_elements = [\nend_of_edit"}),
    ]
    assert file_accesses(text_actions) == [
        FileWrite(("reproduce_bug.py",)),
        FileWrite(("reproduce_bug.py",)),
        FileRead("pydicom/pixel_data_handlers/numpy_handler.py", window="open at line 293"),
        FileWrite(("pydicom/pixel_data_handlers/numpy_handler.py",)),
    ]
    function_calls = [
        ToolCallPart("a", "edit", {"search": "x", "replace": "y"}),  # nothing open yet: unknown file
        ToolCallPart("b", "create", {"filename": "reproduce.py"}),
        ToolCallPart("c", "insert", {"text": "from marshmallow.fields import TimeDelta"}),
    ]
    assert file_accesses(function_calls) == [None, FileWrite(("reproduce.py",)), FileWrite(("reproduce.py",))]


@pytest.mark.parametrize(
    ("path", "cwd", "root", "expected"),
    [
        ("./a.py", None, None, "a.py"),
        ("a/../a.py", None, None, "a.py"),
        ("src//util/./io.py", None, None, "src/util/io.py"),
        ("a.py", "/repo", None, "/repo/a.py"),
        ("/repo/a.py", None, None, "/repo/a.py"),
        ("/repo/a.py", None, "/repo", "a.py"),
        ("/repo/a.py", None, "/repo/", "a.py"),
        ("a.py", "/repo/src", "/repo", "src/a.py"),
        ("/other/a.py", None, "/repo", "/other/a.py"),
        ("/repository/a.py", None, "/repo", "/repository/a.py"),
        ("  ", None, None, None),
    ],
)
def test_normalize_path(path: str, cwd: str | None, root: str | None, expected: str | None) -> None:
    assert normalize_path(path, cwd, root) == expected


def test_absolute_and_relative_paths_meet_only_under_a_root() -> None:
    cd = bash("a", "cd /testbed && cat astropy/modeling/separable.py")
    plain = bash("b", "cat astropy/modeling/separable.py")
    assert file_accesses([cd, plain]) == [
        FileRead("/testbed/astropy/modeling/separable.py"),
        FileRead("astropy/modeling/separable.py"),
    ]
    assert file_accesses([cd, plain], root="/testbed") == [FileRead("astropy/modeling/separable.py")] * 2


@pytest.mark.parametrize(
    ("later", "earlier", "covers"),
    [
        (FileRead("a"), FileRead("a", 1, 50), True),
        (FileRead("a", 1, 50), FileRead("a"), False),
        (FileRead("a", 1, 100), FileRead("a", 20, 60), True),
        (FileRead("a", 20, 60), FileRead("a", 1, 100), False),
        (FileRead("a", 10, 20), FileRead("a", 15, 30), False),
        (FileRead("a", 10), FileRead("a", 15, 30), True),
        (FileRead("a", 10, 40), FileRead("a", 15), False),
        (FileRead("a", -50), FileRead("a", -30), True),
        (FileRead("a", -30), FileRead("a", -50), False),
        (FileRead("a", 1, 500), FileRead("a", -30), False),
        (FileRead("a"), FileRead("a", -30), True),
        (FileRead("a", window="open at line 5"), FileRead("a", window="open at line 5"), True),
        (FileRead("a", window="open at line 5"), FileRead("a", window="open at line 9"), False),
        (FileRead("a", 1, 900), FileRead("a", window="open at line 5"), False),
        (FileRead("a"), FileRead("a", window="open at line 5"), True),
    ],
)
def test_range_coverage(later: FileRead, earlier: FileRead, covers: bool) -> None:
    assert later.covers(earlier) is covers


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"path": ""}, "non-empty string"),
        ({"path": "a", "start": 0}, "non-zero int"),
        ({"path": "a", "start": 5, "end": 2}, "not a range"),
        ({"path": "a", "start": -5, "end": 2}, "not a range"),
        ({"path": "a", "start": True}, "non-zero int"),
    ],
)
def test_bad_file_reads_are_named(kwargs: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        FileRead(**kwargs)


def test_an_editor_window_is_the_range_its_header_states() -> None:
    swe_agent = (
        "[File: /pydicom__pydicom/pydicom/pixel_data_handlers/numpy_handler.py (372 lines total)]\n"
        '(272 more lines above)\n273:            "Unable to convert the pixel data as the transfer syntax "\n'
    )
    window = FileRead("numpy_handler.py", window="open at line 293")
    assert shown_extent(window, ToolResultPart("c", "open", swe_agent)) == FileRead("numpy_handler.py", 273)
    fields = (
        "[File: src/marshmallow/fields.py (1997 lines total)]\r\n(1456 more lines above)\r\n"
        "1457: x\r\n(441 more lines below)\n"
    )
    assert shown_extent(window, ToolResultPart("c", "open", fields)) == FileRead(
        "numpy_handler.py", 1457, 1556
    )
    openhands = (
        "[File: /workspace/src/App.css (42 lines total)]\n(this is the beginning of the file)\n"
        "1|#root {\n42|}\n(this is the end of the file)\n"
    )
    assert shown_extent(window, ToolResultPart("c", "x", openhands)) == FileRead("numpy_handler.py")
    assert shown_extent(window, ToolResultPart("c", "x", "no header")) == window
    assert shown_extent(FileRead("a", 3, 9), ToolResultPart("c", "x", openhands)) == FileRead("a", 3, 9)


@pytest.mark.parametrize(
    "content",
    [
        "<tool_use_error>File does not exist.</tool_use_error>",
        "<tool_use_error>Sibling tool call errored</tool_use_error>",
        "EISDIR: illegal operation on a directory, read",
        "File content (85812 tokens) exceeds maximum allowed tokens (25000). Please use offset and limit "
        "parameters.",
        "ERROR:\nInvalid `view_range` parameter: [100, 150]. Its second element `150` should be smaller "
        "than the number of lines in the file: `122`.",
        "<returncode>2</returncode>\n<output>\nsed: can't read src/missing.py: No such file or directory\n"
        "</output>",
        "cat: src/missing.py: No such file or directory",
    ],
)
def test_failed_reads(content: str) -> None:
    assert read_failed(ToolResultPart("c", "Read", content))


def test_successful_and_cut_reads() -> None:
    ok = (
        "<returncode>0</returncode>\n<output>\ndef _cstack(left, right):\n"
        "    noutp = _compute_n_outputs(left, right)\n</output>"
    )
    assert not read_failed(ToolResultPart("c", "bash", ok)) and not read_is_partial(
        ToolResultPart("c", "bash", ok)
    )
    assert read_failed(ToolResultPart("c", "Read", "fine", is_error=True))
    for cut in (
        "Total output lines: 295\n\n\n  const apiEndpoint =\n[... omitted 39 of 295 lines ...]\n\n  return "
        "createdChat\n}",
        "<returncode>0</returncode>\n<warning>\nThe output of your last command was too long.\nPlease try "
        "a different command.",
        "head of the file\n<elided_chars>\n4820 characters elided\n</elided_chars>\n<output_tail>\ntail",
        "start\n\n... [2937 characters truncated] ...\n\nend",
    ):
        assert read_is_partial(ToolResultPart("c", "bash", cut))


# --- the file_key seam ------------------------------------------------------------------------


def fetch_source(call: ToolCallPart) -> FileRead | FileWrite | str | None:
    args = call.arguments_dict()
    if call.name == "fetch_source":
        return FileRead(args["module"].replace(".", "/") + ".py", args.get("first", 1), args.get("last"))
    if call.name == "load":
        return args["name"]
    if call.name == "store":
        return FileWrite((args["name"],))
    return None


def test_file_key_recognises_your_tools_and_leaves_the_rest_to_the_built_in_shapes() -> None:
    calls = [
        ToolCallPart("a", "fetch_source", {"module": "pkg.mod", "first": 3, "last": 9}),
        ToolCallPart("b", "load", {"name": "/repo/./data/x.csv"}),
        ToolCallPart("c", "store", {"name": "/repo/data/x.csv"}),
        read("d", "/repo/pkg/mod.py"),
    ]
    assert file_accesses(calls, file_key=fetch_source, root="/repo") == [
        FileRead("pkg/mod.py", 3, 9),
        FileRead("data/x.csv"),
        FileWrite(("data/x.csv",)),
        FileRead("pkg/mod.py"),
    ]
    assert file_accesses(calls, file_key=fetch_source, builtin=False)[3] is None


def test_file_key_dedupes_your_tools() -> None:
    history = session(
        (
            ToolCallPart("a", "fetch_source", {"module": "pkg.mod", "first": 3, "last": 9}),
            file_text("mod", 7),
        ),
        (ToolCallPart("b", "fetch_source", {"module": "pkg.mod"}), file_text("mod")),
    )
    out, notes = eager(file_key=fetch_source).process(history, context())
    assert replaced_ids(history, out) == {"a"} and notes.replaced == 1
    assert result(out, "a").content.startswith(f"{NOTICE_PREFIX}lines 3-9 of pkg/mod.py was read again later")


def test_file_key_returning_something_else_is_a_type_error() -> None:
    history = session((ToolCallPart("a", "fetch_source", {}), "x"))
    with pytest.raises(
        TypeError, match=r"file_key returned a builtins.int for tool call 'a' \(fetch_source\)"
    ):
        eager(file_key=lambda call: 3).process(history, context())  # type: ignore[arg-type,return-value]


# --- what it replaces, and how it says so ------------------------------------------------------


def test_a_later_read_of_the_same_file_supersedes_the_earlier_one() -> None:
    path = f"{SPOTTER}/lib/spotter/transcripts.ex"
    history = session(
        (read("toolu_01A", path), file_text("transcripts")),
        (bash("toolu_01B", "mix test 2>&1 | tail -5"), "3 tests, 0 failures"),
        (read("toolu_01C", path), file_text("transcripts")),
    )
    out, notes = eager().process(history, context())
    assert replaced_ids(history, out) == {"toolu_01A"}
    assert result(out, "toolu_01A").content == (
        f"{NOTICE_PREFIX}{path} was read again later: the current copy is in the result of tool call "
        f"toolu_01C (Read)."
    )
    # The call and the result slot stay: pairing holds, every other message is the same object.
    assert [m.role for m in out] == [m.role for m in history]
    assert [c.id for m in out for c in m.tool_calls] == ["toolu_01A", "toolu_01B", "toolu_01C"]
    assert all(
        a is b for a, b in zip(out, history) if not any(p.tool_call_id == "toolu_01A" for p in b.tool_results)
    )
    assert check_neutral(out) == []
    assert notes.replaced == 1 and notes.details == [f"replaced {path} (tool call toolu_01A) at message 3"]
    assert tokens(out) < tokens(history)


def test_nothing_to_do_returns_the_very_same_list() -> None:
    history = session((read("a", "src/a.py"), file_text("a")), (read("b", "src/b.py"), file_text("b")))
    out, notes = eager().process(history, context())
    assert out is history and notes.replaced == 0 and not notes.details
    assert eager().process([], context())[0] == []


@pytest.mark.parametrize(
    "spellings", [("./src/app.py", "src/app.py"), ("src/util/../app.py", "./src/app.py", "src/app.py")]
)
def test_one_file_however_it_is_spelled(spellings: tuple[str, ...]) -> None:
    steps = [(read(f"r{n}", p), file_text("app")) for n, p in enumerate(spellings)]
    history = session(*steps)
    out, _ = eager().process(history, context())
    last = f"r{len(spellings) - 1}"
    assert replaced_ids(history, out) == {f"r{n}" for n in range(len(spellings) - 1)}
    assert all(f"tool call {last} (Read)" in result(out, f"r{n}").content for n in range(len(spellings) - 1))


def test_absolute_and_relative_spellings_are_one_file_only_under_a_root() -> None:
    history = session(
        (bash("a", "cat /testbed/astropy/modeling/separable.py"), file_text("separable")),
        (bash("b", "cat astropy/modeling/separable.py"), file_text("separable")),
    )
    assert eager().process(history, context())[0] is history
    out, _ = eager(root="/testbed").process(history, context())
    assert replaced_ids(history, out) == {"a"}
    assert result(out, "a").content.startswith(f"{NOTICE_PREFIX}astropy/modeling/separable.py was read")


@pytest.mark.parametrize(
    ("first", "second", "superseded"),
    [
        # A later read of lines 1-50 does not supersede an earlier whole read ...
        (read("a", "src/app.py"), read("b", "src/app.py", limit=50), False),
        # ... a later whole read supersedes an earlier partial one ...
        (read("a", "src/app.py", offset=20, limit=40), read("b", "src/app.py"), True),
        (bash("a", "sed -n '219,248p' src/app.py"), bash("b", "cat src/app.py"), True),
        # ... and a later range supersedes an earlier range only when it covers it.
        (bash("a", "sed -n '20,60p' src/app.py"), bash("b", "sed -n '1,100p' src/app.py"), True),
        (bash("a", "sed -n '1,100p' src/app.py"), bash("b", "sed -n '20,60p' src/app.py"), False),
        (bash("a", "sed -n '10,20p' src/app.py"), bash("b", "sed -n '15,30p' src/app.py"), False),
        (bash("a", "sed -n '340,350p' src/app.py"), bash("b", "cat src/app.py | sed -n '340,355p'"), True),
        (bash("a", "tail -30 build.log"), bash("b", "tail -n 50 build.log"), True),
        (bash("a", "tail -50 build.log"), bash("b", "tail -30 build.log"), False),
        (
            bash("a", "head -30 src/app.py"),
            ToolCallPart("b", "str_replace_editor", {"command": "view", "path": "src/app.py"}),
            True,
        ),
        (bash("a", "cat src/app.py"), ToolCallPart("b", "open", {"command": "open src/app.py 40"}), False),
        (
            ToolCallPart("a", "open", {"command": "open src/app.py 40"}),
            ToolCallPart("b", "open", {"command": "open src/app.py 40"}),
            True,
        ),
    ],
)
def test_ranges(first: ToolCallPart, second: ToolCallPart, superseded: bool) -> None:
    history = session((first, file_text("app", 60)), (second, file_text("app", 60)))
    out, _ = eager().process(history, context())
    assert replaced_ids(history, out) == ({"a"} if superseded else set())


def test_a_window_that_shows_the_whole_file_is_a_whole_read() -> None:
    # OpenHands `open_file` of a 42-line file, an edit, then `open_file` again (real darkmode session).
    header = "[File: /workspace/src/App.css ({n} lines total)]\n(this is the beginning of the file)\n"
    body = "\n".join(f"{k}|  .rule-{k} {{ color: #{k:03}; }}" for k in range(1, 43))
    end = "\n(this is the end of the file)\n[Jupyter current working directory: /workspace]"
    history = session(
        (
            ToolCallPart("a", "execute_ipython_cell", {"code": "open_file('/workspace/src/App.css')"}),
            header.format(n=42) + body + end,
        ),
        (
            ToolCallPart(
                "b",
                "execute_ipython_cell",
                {
                    "code": "edit_file_by_replace(\n'/workspace/src/App.css',\n"
                    "to_replace='a',\nnew_content='b')"
                },
            ),
            "[File: /workspace/src/App.css (43 lines total after edit)]\n1|#root {",
        ),
        (
            ToolCallPart("c", "execute_ipython_cell", {"code": "open_file('/workspace/src/App.css')"}),
            header.format(n=42) + body + end,
        ),
    )
    out, _ = eager().process(history, context())
    assert replaced_ids(history, out) == {"a"}
    assert result(out, "a").content.endswith("(execute_ipython_cell). The file was changed in between.")


def test_writes_in_between() -> None:
    path = "src/app.py"
    edit = ToolCallPart("e", "Edit", {"file_path": path, "old_string": "a", "new_string": "b"})
    # Read, edit, read again whole: the first copy is outdated and superseded; the notice says so.
    history = session(
        (read("a", path), file_text("app")),
        (edit, "The file src/app.py has been updated."),
        (read("b", path), file_text("app")),
    )
    out, _ = eager().process(history, context())
    assert result(out, "a").content == (
        f"{NOTICE_PREFIX}{path} was read again later: the current copy is in the result of tool call b "
        f"(Read). "
        "The file was changed in between."
    )
    # After an edit a partial read does not supersede, even one that would cover the earlier lines:
    # the edit moved them.
    for first, second in [
        (read("a", path), read("b", path, limit=50)),
        (read("a", path, offset=10, limit=20), read("b", path, limit=100)),
        (bash("a", f"sed -n '10,20p' {path}"), bash("b", f"sed -n '1,100p' {path}")),
    ]:
        history = session((first, file_text("app")), (edit, "updated"), (second, file_text("app")))
        assert eager().process(history, context())[0] is history
    # A shell edit counts; an edit of another file does not.
    for between, replaced in [
        (bash("s", f"sed -i 's/a/b/' {path}"), False),
        (ToolCallPart("w", "Write", {"file_path": "other.py", "content": "x"}), True),
    ]:
        history = session(
            (read("a", path, offset=10, limit=20), file_text("app")),
            (between, ""),
            (read("b", path, limit=100), file_text("app")),
        )
        assert (replaced_ids(history, eager().process(history, context())[0]) == {"a"}) is replaced
    # A read followed by an edit and no later read stays: there is no current copy to point at.
    history = session((read("a", path), file_text("app")), (edit, "updated"))
    assert eager().process(history, context())[0] is history


def test_a_failed_read_is_never_replaced_and_never_supersedes() -> None:
    path = f"{SPOTTER}/tasks/bd0afab.output"
    missing = "<tool_use_error>File does not exist.</tool_use_error>"
    history = session((read("a", path), missing), (read("b", path), file_text("out")))
    assert eager().process(history, context())[0] is history
    history = session((read("a", path), file_text("out")), (read("b", path), missing))
    assert eager().process(history, context())[0] is history
    failed = "<returncode>1</returncode>\n<output>\n" + "Traceback: boom\n" * 60 + "</output>"
    history = session((bash("a", "cat src/app.py"), failed), (bash("b", "cat src/app.py"), file_text("app")))
    assert eager().process(history, context())[0] is history
    history = session((read("a", path), "long but failed " * 80), (read("b", path), file_text("out")))
    history[3] = Message("tool", (replace(history[3].parts[0], is_error=True),))  # type: ignore[arg-type]
    assert eager().process(history, context())[0] is history


def test_a_read_the_harness_cut_does_not_supersede_but_is_superseded() -> None:
    cut = (
        'Total output lines: 420\n\nimport { ChatbotUIContext } from "@/context/context"\n'
        "[... omitted 164 of 420 lines ...]\n"
    )
    cut += file_text("handler", 60)
    call = ["bash", "-lc", "sed -n '1,420p' components/chat/chat-hooks/use-chat-handler.tsx"]
    history = session(
        (ToolCallPart("a", "shell", {"command": call, "workdir": CODEX_DIR}), file_text("handler")),
        (ToolCallPart("b", "shell", {"command": call, "workdir": CODEX_DIR}), cut),
    )
    assert eager().process(history, context())[0] is history
    history = session(
        (ToolCallPart("a", "shell", {"command": call, "workdir": CODEX_DIR}), cut),
        (ToolCallPart("b", "shell", {"command": call, "workdir": CODEX_DIR}), file_text("handler")),
    )
    assert replaced_ids(history, eager().process(history, context())[0]) == {"a"}


def test_pinned_results_are_kept_and_still_supersede() -> None:
    history = session(
        (read("a", "src/app.py"), file_text("app")),
        (read("b", "src/app.py"), file_text("app")),
        (read("c", "src/app.py"), file_text("app")),
    )
    by_part = list(history)
    by_part[3] = Message("tool", (replace(result(history, "a"), pinned=True),))
    by_message = list(history)
    by_message[3] = replace(history[3], pinned=True)
    for pinned in (by_part, by_message):
        out, _ = eager().process(pinned, context())
        assert replaced_ids(pinned, out) == {"b"}
        assert out[3] is pinned[3]
    later_pinned = list(history)
    later_pinned[7] = Message("tool", (replace(result(history, "c"), pinned=True),))
    out, _ = eager().process(later_pinned, context())
    assert replaced_ids(later_pinned, out) == {"a", "b"}
    assert "tool call c (Read)" in result(out, "a").content


def test_the_final_request_is_never_edited_but_its_reads_supersede() -> None:
    # A parallel group reading one file twice, as the last request: left alone.
    calls = (read("a", "src/app.py"), read("b", "src/app.py"))
    history = [
        Message.system("sys"),
        Message.user("task"),
        Message("assistant", calls),
        Message("tool", tuple(ToolResultPart(c.id, "Read", file_text("app")) for c in calls)),
    ]
    assert eager().process(history, context())[0] is history
    # Once the model answered, the earlier of the two is superseded by the other.
    answered = [*history, Message.assistant("Read it."), Message.user("Go on.")]
    out, _ = eager().process(answered, context())
    assert replaced_ids(answered, out) == {"a"}
    assert check_neutral(out) == []


def test_notices_always_name_the_latest_copy() -> None:
    steps = [(read(c, "src/app.py"), file_text("app")) for c in ("a", "b", "c")]
    history = session(*steps)
    # Through a pipeline, as persistent mode runs it: the notices carry the marker of what wrote them.
    out, _ = Pipeline([eager()]).process(history, context())
    assert replaced_ids(history, out) == {"a", "b"}
    assert all("tool call c (Read)" in result(out, x).content for x in ("a", "b"))
    # Carried forward (persistent mode), a fourth read re-points every notice at once.
    grown = [*out, *session((read("d", "src/app.py"), file_text("app")))[2:]]
    again, notes = Pipeline([eager()]).process(grown, context())
    assert all("tool call d (Read)" in result(again, x).content for x in ("a", "b", "c"))
    assert notes.details[:2] == [
        "DedupeFileReads: re-pointed the notice for src/app.py (tool call a) at message 3",
        "DedupeFileReads: re-pointed the notice for src/app.py (tool call b) at message 5",
    ]
    raw = [*history, *session((read("d", "src/app.py"), file_text("app")))[2:]]
    assert eager().process(raw, context())[0] == again


def test_a_copy_another_processor_cleared_is_no_current_copy() -> None:
    history = session(
        (read("a", "src/app.py"), file_text("app")),
        (
            read("b", "src/app.py"),
            "[cleared: output of Read(file_path='src/app.py'), 1,204 tokens; call the tool again to see it]",
        ),
    )
    assert eager().process(history, context())[0] is history
    history += session((read("c", "src/app.py"), file_text("app")))[2:]
    out, _ = eager().process(history, context())
    assert replaced_ids(history, out) == {"a"}
    assert "tool call c (Read)" in result(out, "a").content


def test_a_read_shorter_than_its_notice_stays() -> None:
    history = session(
        (read("a", "test/test_helper.exs"), "     1\u2192ExUnit.start()\n     2\u2192"),
        (read("b", "test/test_helper.exs"), "     1\u2192ExUnit.start()\n     2\u2192"),
    )
    assert eager().process(history, context())[0] is history


def test_other_parts_and_messages_pass_through() -> None:
    history = session(
        (read("a", "src/app.py"), file_text("app")), (read("b", "src/app.py"), file_text("app"))
    )
    history[3] = Message("tool", (*history[3].parts, OtherPart("cache-point")))
    history.insert(4, Message("user", (TextPart("note"), OtherPart("image-url", "x"))))
    out, _ = eager().process(history, context())
    assert out[3].parts[1] is history[3].parts[1]
    assert out[4] is history[4]
    assert replaced_ids(history, out) == {"a"}


# --- when: min_gain, the trigger, the prompt cache ---------------------------------------------


def test_min_gain_waits_for_a_batch_worth_a_cache_miss() -> None:
    history = session(*[(read(f"r{n}", "src/app.py"), file_text("app")) for n in range(4)])
    one = tokens([history[3]])  # one superseded copy
    assert DedupeFileReads(trigger=None, min_gain=10 * one).process(history, context())[0] is history
    out, _ = DedupeFileReads(trigger=None, min_gain=2 * one).process(history, context())
    assert replaced_ids(history, out) == {"r0", "r1", "r2"}


def test_the_trigger_waits_for_the_high_water_mark() -> None:
    history = session(*[(read(f"r{n}", "src/app.py"), file_text("app")) for n in range(4)])
    size = tokens(history)
    assert (
        DedupeFileReads(trigger=Trigger(max_tokens=size), min_gain=0).process(history, context())[0]
        is history
    )
    out, _ = DedupeFileReads(trigger=Trigger(max_tokens=size - 50), min_gain=0).process(history, context())
    assert replaced_ids(history, out) == {"r0", "r1", "r2"}
    # The default trigger is half the context window.
    assert DedupeFileReads().process(history, context(2 * size + 2))[0] is history
    assert DedupeFileReads(min_gain=0).process(history, context(2 * size - 200))[0] is not history


def test_replayed_call_by_call_it_edits_in_a_few_batches_and_both_modes_agree() -> None:
    steps = []
    for n in range(40):
        steps.append((read(f"r{n}", f"src/m{n % 5}.py"), file_text(f"m{n % 5}")))
    history = session(*steps)
    ctx = context(12_000)
    min_gain = 4_000
    processor = DedupeFileReads(min_gain=min_gain)
    previous: list[Message] = []
    batches = 0
    for step in replay_both_modes(processor, processor, history, ctx):
        assert_idempotent(processor, step.output, ctx)
        if step.grown is not None:
            batches += 1
            assert tokens(step.grown) > 6_000  # the trigger fired: half the window
            assert tokens(step.grown) - tokens(step.output) >= min_gain
        previous = step.output
    freed = tokens(history) - tokens(previous)
    assert freed > tokens(history) / 2
    assert 2 <= batches <= freed // min_gain  # batches, not a trickle


# --- configuration, reports, frameworks ------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"min_gain": -1}, ValueError, "min_gain must be a non-negative int, got -1"),
        ({"min_gain": True}, ValueError, "min_gain must be a non-negative int"),
        ({"trigger": 0.5}, TypeError, "trigger must be a historykit Trigger or None, got float"),
        ({"file_key": "Read"}, TypeError, "file_key must be callable, got str"),
        ({"root": Path("/repo")}, TypeError, "root must be a str or None"),
    ],
)
def test_bad_configuration_is_named(kwargs: dict[str, Any], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        DedupeFileReads(**kwargs)


def test_run_reports_what_it_replaced() -> None:
    history = session(*[(read(f"r{n}", "src/app.py"), file_text("app")) for n in range(3)])
    result_ = Pipeline([eager()]).run(history, context_window=100_000)
    (step,) = result_.report.steps
    assert step.processor == "DedupeFileReads" and step.notes.replaced == 2
    assert step.tokens_before - step.tokens_after > 1_000
    assert "replaced src/app.py (tool call r0) at message 3" in str(result_.report)


@pytest.mark.pydantic_ai
def test_pydantic_ai_agent_sees_notices_for_files_it_read_again() -> None:
    from pydantic_ai import messages as pai

    dedupe = DedupeFileReads(trigger=None, min_gain=500)
    paths = [f"./src/m{step % 3}.py" for step in range(12)]
    agent, seen = file_reading_agent(dedupe, paths, lambda path: file_text(path, 60))

    assert agent.run_sync("Read the modules.").output == "done"
    returns = [p for m in seen[-1] for p in getattr(m, "parts", ()) if isinstance(p, pai.ToolReturnPart)]
    contents = [str(p.content) for p in returns]
    assert all(c.startswith(NOTICE_PREFIX) for c in contents[:9])
    assert contents[9:] == [file_text(f"./src/m{k}.py", 60) for k in range(3)]
    assert (
        "src/m0.py was read again later: the current copy is in the result of tool call call_9 (read_file)."
        in contents[0]
    )
    # Native messages it did not touch are the caller's own objects.
    assert all(any(m is n for n in seen[-2]) for m in seen[-1][:1])


def test_langchain_messages_keep_their_fields() -> None:
    pytest.importorskip("langchain_core")  # absent from the Pydantic AI 1.x environment
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    history: list[Any] = [SystemMessage("sys"), HumanMessage("task")]
    for n in range(3):
        history.append(
            AIMessage(
                "",
                id=f"ai{n}",
                tool_calls=[{"id": f"c{n}", "name": "Read", "args": {"file_path": "src/app.py"}}],
            )
        )
        history.append(ToolMessage(file_text("app"), tool_call_id=f"c{n}", id=f"tm{n}", artifact={"n": n}))
    out = eager()(history)
    assert [type(m) for m in out] == [type(m) for m in history]
    assert out[3].content.startswith(NOTICE_PREFIX) and out[5].content.startswith(NOTICE_PREFIX)
    assert out[3].id == "tm0" and out[3].tool_call_id == "c0" and out[3].artifact == {"n": 0}
    assert all(out[i] is history[i] for i in (0, 1, 2, 4, 6, 7))


# --- the corpus ----------------------------------------------------------------------------------


def readme_repeats() -> dict[str, int]:
    """The corpus README's "repeated file reads" column, by session."""
    readme = CORPUS.parent / "README.md"
    out: dict[str, int] = {}
    if not readme.exists():
        return out
    for line in readme.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 3 and cells[1].startswith("`") and cells[1].endswith(".jsonl`"):
            out[cells[1].strip("`")[: -len(".jsonl")]] = int(cells[-2])
    return out


# Sessions whose re-reads leave no earlier copy to replace, and why (checked below: the oracle
# finds nothing to replace in them, so this list cannot hide a miss).
NO_SUPERSEDED_COPY = {
    "claudecode__spotter-4d5611e5-subagent-a2898e3": "each re-read follows a failed read (errored)",
    "claudecode__spotter-6c2214d7-subagent-afc096d": "the re-read follows a read refused as too large",
    "codex__sessionview-019a93b9": "re-reads are other line ranges, or cut by Codex ([... omitted ...])",
    "minisweagent__dschat-pydicom-1413": "re-reads are small ranges after edits (sed -i) moved the lines",
    "openhands__msb-ponyc-4588": "the whole view was clipped; later views are ranges after edits",
}


def oracle(history: list[Message], root: str | None = None) -> dict[str, set[str]]:
    """Brute force, from the definition: for every replaceable read, the later copies that supersede it."""
    calls = [c for m in history for c in m.tool_calls]
    located: dict[str, tuple[int, ToolResultPart]] = {}
    for index, msg in enumerate(history):
        for part in msg.tool_results:
            located.setdefault(part.tool_call_id, (index, part))
    accesses = file_accesses(calls, root=root)
    reads = []
    writes: dict[str, list[int]] = {}
    for seq, (call, found) in enumerate(zip(calls, accesses)):
        if isinstance(found, FileWrite):
            for path in found.paths:
                writes.setdefault(path, []).append(seq)
        elif isinstance(found, FileRead) and call.id in located:
            index, part = located[call.id]
            text = part.content.strip()
            if read_failed(part) or (len(text) < 500 and text.startswith("[") and text.endswith("]")):
                continue
            pinned = part.pinned or history[index].pinned
            copy = not read_is_partial(part) and not part.content.startswith(NOTICE_PREFIX)
            reads.append((seq, call.id, shown_extent(found, part), index, copy, pinned))
    final = final_request_start(history)
    expected: dict[str, set[str]] = {}
    for seq, call_id, found, index, _, pinned in reads:
        if pinned or index >= final:
            continue
        later = {
            other_id
            for other_seq, other_id, other, _, copy, _ in reads
            if copy
            and other_seq > seq
            and other.path == found.path
            and other.covers(found)
            and (other.whole or not any(seq < w < other_seq for w in writes.get(found.path, ())))
        }
        if later:
            expected[call_id] = later
    return expected


def named_target(content: str) -> str:
    return content.split("result of tool call ", 1)[1].split(" (", 1)[0]


@pytest.mark.parametrize("path", corpus_paths(), ids=[p.stem for p in corpus_paths()])
def test_corpus_session_against_the_oracle(path: Path, record_property: Any) -> None:
    from historykit.formats import read_chat_jsonl

    history = read_chat_jsonl(path)
    assert check_neutral(history) == []
    before = tokens(history)
    out, notes = eager().process(history, context())
    assert check_neutral(out) == []
    expected = oracle(history)
    replaced = replaced_ids(history, out)
    assert replaced <= set(expected)
    for call_id in set(expected) - replaced:  # superseded, but the notice would not be shorter
        assert COUNTER.count_part(result(history, call_id)) < 150
    for call_id in replaced:
        content = result(out, call_id).content
        assert content.startswith(NOTICE_PREFIX)
        target = named_target(content)
        assert target in expected[call_id]
        assert target not in replaced  # the copy it names is in the history
    assert_only_results_changed(history, out)
    calls = [c for m in history for c in m.tool_calls]
    recognised = sum(isinstance(a, FileRead) for a in file_accesses(calls))
    freed = before - tokens(out)
    record_property("reads_recognised", recognised)
    record_property("reads_replaced", notes.replaced)
    record_property("tokens_before", before)
    record_property("tokens_freed", freed)
    repeats = readme_repeats().get(path.stem)
    if repeats is None:
        return
    if path.stem in NO_SUPERSEDED_COPY:
        assert expected == {}, NO_SUPERSEDED_COPY[path.stem]
    elif repeats > 0:
        assert freed > 0
    else:
        assert freed == 0


def test_corpus_session_persistent_and_view_only_agree_call_by_call(corpus_session: list[Message]) -> None:
    ctx = context(32_000)
    view, persistent = DedupeFileReads(), DedupeFileReads()
    previous: list[Message] = []
    for step in replay_both_modes(view, persistent, corpus_session, ctx):
        if step.grown is not None:
            freed = tokens(step.grown) - tokens(step.output)
            assert freed >= 1_000 - NOTICE_SLACK * len(replaced_ids(step.grown, step.output))
        previous = step.output
    assert_idempotent(view, previous, ctx)


def assert_only_results_changed(original: list[Message], out: list[Message]) -> None:
    """`out` is `original` with some read results replaced by notices, nothing else."""
    assert len(out) == len(original)
    for before, after in zip(original, out):
        if after is before:
            continue
        assert after.role == before.role == "tool" or after.role == before.role
        assert after.pinned == before.pinned is False
        assert len(after.parts) == len(before.parts)
        for p, q in zip(before.parts, after.parts):
            if p is q:
                continue
            assert isinstance(p, ToolResultPart) and isinstance(q, ToolResultPart)
            assert (q.tool_call_id, q.name, q.is_error, q.pinned) == (
                p.tool_call_id,
                p.name,
                p.is_error,
                False,
            )
            assert q.content.startswith(NOTICE_PREFIX) and q.content != p.content


# --- random histories ----------------------------------------------------------------------------

configs = st.builds(
    lambda trigger, min_gain, root: DedupeFileReads(trigger=trigger, min_gain=min_gain, root=root),
    st.one_of(
        st.none(),
        st.builds(Trigger, max_tokens=st.integers(50, 3_000)),
        st.builds(Trigger, max_fraction=st.floats(0.1, 1.0)),
    ),
    st.integers(0, 600),
    st.sampled_from([None, "src"]),
)
windows = st.integers(500, 8_000)


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(neutral_histories(), configs, windows)
def test_random_histories_keep_every_rule(
    history: list[Message], processor: DedupeFileReads, window: int
) -> None:
    ctx = context(window)
    out, _ = processor.process(history, ctx)
    event("edited" if out is not history else "unchanged")
    # Valid stays valid; final request and the current cycle's thinking are untouched.
    assert_in_place_edit_rules(history, out)
    assert_only_results_changed(history, out)
    # System messages, assistant messages (thinking included) and pinned content are the very same
    # objects.
    assert all(a is b for a, b in zip(out, history) if b.role in ("system", "assistant") or b.pinned)
    # Every notice names a later copy that supersedes the read and is still in the history.
    expected = oracle(history, processor.root)
    replaced = replaced_ids(history, out)
    assert replaced <= set(expected)
    for call_id in replaced:
        target = named_target(result(out, call_id).content)
        assert target in expected[call_id] and target not in replaced
    # Eagerly, it replaces every superseded read (unless the notice would not be shorter).
    everything, _ = replace(processor, trigger=None, min_gain=0).process(history, ctx)
    for call_id in set(expected) - replaced_ids(history, everything):
        assert COUNTER.count_part(result(history, call_id)) < 150
    assert replaced <= replaced_ids(history, everything)


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(neutral_histories(max_turns=6, max_steps=5), configs, windows)
def test_random_histories_persistent_equals_view_only_and_never_trickles(
    history: list[Message], processor: DedupeFileReads, window: int
) -> None:
    ctx = context(window)
    high = processor.trigger.high_tokens(ctx) if processor.trigger is not None else None
    for step in replay_both_modes(processor, processor, history, ctx):
        out, grown = step.output, step.grown
        assert_idempotent(processor, out, ctx)  # the very same list
        if grown is not None:
            event("a batch between two calls")
            # Decisions count a notice at an estimate of its size, and a notice re-pointed in a batch
            # may grow by a few tokens (it may now say the file changed): allow that much per notice.
            slack = NOTICE_SLACK * sum(
                p.content.startswith(NOTICE_PREFIX) for m in out for p in m.tool_results
            )
            # A batch frees `min_gain` ...
            assert tokens(grown) - tokens(out) >= max(processor.min_gain, 1) - slack
            # ... and happens only over the high-water mark.
            if high is not None:
                assert tokens(grown) > high - slack


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(neutral_histories(max_turns=4, max_steps=4), st.integers(0, 400))
def test_random_histories_with_a_heuristic_counter(history: list[Message], min_gain: int) -> None:
    # The processor's decisions use the context's counter: another tokenizer, same guarantees.
    ctx = context(2_000, TokenCounter(tokenizer=heuristic_tokenizer))
    processor = DedupeFileReads(trigger=Trigger(max_tokens=300), min_gain=min_gain)
    out, _ = processor.process(history, ctx)
    assert_idempotent(processor, out, ctx)
    assert_only_results_changed(history, out)


# --- shell tokens --------------------------------------------------------------------------------------


@settings(max_examples=examples(500))
@given(
    st.text(alphabet=st.sampled_from(list("ab./-_~*?=#$ \t\r\n();<>|&2\x0b\xa0é'\"\\")), max_size=60),
    st.booleans(),
)
def test_scripts_split_as_shlex_splits_them(script: str, operators: bool) -> None:
    import shlex

    from historykit.processors._file_reads import shell_tokens

    lexer = shlex.shlex(script, posix=True, punctuation_chars=operators)
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        expected: list[str] | None = list(lexer)
    except ValueError:
        expected = None
    assert shell_tokens(script, operators=operators) == expected


def test_quoted_scripts_go_through_shlex_and_unbalanced_quotes_give_none() -> None:
    from historykit.processors._file_reads import shell_tokens

    assert shell_tokens("cat 'a b.py' && head -n 5 \"c d.py\"") == [
        "cat",
        "a b.py",
        "&&",
        "head",
        "-n",
        "5",
        "c d.py",
    ]
    assert shell_tokens("cat 'a.py") is None
