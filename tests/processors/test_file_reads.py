"""One file-read recogniser: `file_accesses` (strict) and `files_touched` (the looser reading
summaries list) resolve a call's paths alike, so a file has one name in dedupe and in summaries."""

from __future__ import annotations

import posixpath

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from historykit._messages import Message, ToolCallPart, ToolResultPart
from historykit.processors._file_reads import FileRead, FileWrite, _prepare, file_accesses, files_touched
from historykit.processors._summarizers import ExtractiveSummarizer, parse_sections
from tests.strategies import examples


def bash(command: str, call_id: str = "1") -> ToolCallPart:
    return ToolCallPart(call_id, "bash", {"command": command})


def test_a_cd_changes_the_directory_the_read_is_in_for_both_readings() -> None:
    call = bash("cd src && sed -n 1,20p a.py")
    assert file_accesses([call]) == [FileRead("src/a.py", 1, 20)]
    assert files_touched(call) == [("src/a.py", "read")]
    history = [Message.user("task"), Message("assistant", (call,))]
    assert parse_sections(ExtractiveSummarizer()(history))["Files touched"] == ["src/a.py (read)"]


def test_the_looser_reading_follows_cd_workdir_and_root_too() -> None:
    assert files_touched(bash("cd src; cat a.py b.py | grep x > ../out.txt")) == [
        ("src/a.py", "read"),
        ("src/b.py", "read"),
        ("out.txt", "written"),
    ]
    assert files_touched(bash("cd /repo/src && sed -i 's/a/b/' x.py"), root="/repo") == [
        ("src/x.py", "edited")
    ]
    codex = ToolCallPart("1", "shell", {"command": ["bash", "-lc", "cat a.py"], "workdir": "/repo/lib"})
    assert files_touched(codex, root="/repo") == [("lib/a.py", "read")]
    assert file_accesses([codex], root="/repo") == [FileRead("lib/a.py")]
    # A directory the call does not state: the path as written (the strict reading refuses it).
    assert files_touched(bash("cd $DIR && cat a.py")) == [("a.py", "read")]
    assert file_accesses([bash("cd $DIR && cat a.py")]) == [None]


_segment = st.sampled_from(["src", "lib", "pkg", "..", ".", "a.b"])
_name = st.sampled_from(["a.py", "b.txt", "./c.md", "d/e.py", "../f.rs"])
_reader = st.sampled_from(["cat", "nl -ba", "head -n 5", "tail -n 7", "sed -n '3,9p'"])


@settings(max_examples=examples(200), deadline=None)
@given(
    dirs=st.lists(st.lists(_segment, min_size=1, max_size=3).map("/".join), max_size=3),
    absolute=st.booleans(),
    reader=_reader,
    name=_name,
    separator=st.sampled_from([" && ", "; ", "\n"]),
)
def test_both_readings_name_the_file_a_read_after_cds_shows(
    dirs: list[str], absolute: bool, reader: str, name: str, separator: str
) -> None:
    cds = [("/repo/" if absolute and i == 0 else "") + d for i, d in enumerate(dirs)]
    call = bash(separator.join([*(f"cd {d}" for d in cds), f"{reader} {name}"]))
    where = "."
    for d in cds:
        where = posixpath.join(where, d)
    expected = posixpath.normpath(posixpath.join(where, name))
    if expected.startswith("/repo/"):
        expected = expected[len("/repo/") :]
    strict = file_accesses([call], root="/repo")[0]
    assert isinstance(strict, FileRead) and strict.path == expected
    assert (expected, "read") in files_touched(call, root="/repo")


_shell_text = st.lists(
    st.sampled_from(["cd ", "cat ", "head -n 3 ", "sed -n 1,2p ", "sed -i s/a/b/ ", "a.py", "src", "../b.py"])
    | st.sampled_from([" ", " && ", "; ", " | ", " > ", "$X", "\n", "-c "]),
    max_size=12,
).map("".join)


@settings(max_examples=examples(300), deadline=None)
@given(_shell_text)
# Found by this test: a strict read of `a.py$X` (a file the shell names) the looser reading refused.
@example("cat a.py$X")
@example("cd src && head -n 3 ../b.py$X")
# Found by the thorough profile: `cat cd` after `cd cd` reads `cd/cd`, whose `/` comes from the
# directory, not from the operand (`cd`, spelled like no path): the condition looks at the file name.
@example("cd cd  && cat cd ")
def test_whatever_the_shell_a_strict_read_is_a_file_the_looser_reading_names(command: str) -> None:
    call = bash(command)
    strict = file_accesses([call])[0]
    loose = files_touched(call)  # never raises, whatever the shell
    # (The looser reading lists only operands that look like paths: not `cat Makefile`, nor a
    # quoted `'a b.py'`; the generated commands quote nothing. The operand's last name is the read
    # path's, so a `.` there means the operand had one.)
    if isinstance(strict, FileRead) and "." in posixpath.basename(strict.path):
        assert (strict.path, "read") in loose


def test_a_variable_in_a_read_is_part_of_the_file_s_name_to_both_readings() -> None:
    # Claude Code reads a background task's output as `$TMPDIR/...`: the same spelling is the same
    # file in one session, so both readings keep it; a glob or a substitution is no file name.
    for command, path in (
        ("cat a.py$X", "a.py$X"),
        ("tail -30 $TMPDIR/tasks/b.output", "$TMPDIR/tasks/b.output"),
    ):
        strict = file_accesses([bash(command)])[0]
        assert isinstance(strict, FileRead) and strict.path == path
        assert files_touched(bash(command)) == [(path, "read")]
    for command in ("cat src/*.py", "cat `ls a*`.py", "cat 'a[1].py'"):
        assert file_accesses([bash(command)]) == [None], command
        assert files_touched(bash(command)) == [], command


_PATH_KEY = st.sampled_from(
    ["file_path", "path", "filepath", "filename", "file", "target_file", "absolute_path", "notebook_path"]
)
_TOOL_NAME = st.sampled_from(
    [
        "Read",
        "read_file",
        "view_file",
        "cat",
        "open_file",
        "Write",
        "write_file",
        "Edit",
        "MultiEdit",
        "delete_file",
        "Glob",
        "grep_search",
        "list_dir",
        "run_tests",
        "lint",
        "str_replace_editor",
    ]
)
_OTHER_ARGS = st.dictionaries(
    st.sampled_from(
        [
            "offset",
            "limit",
            "view_range",
            "start_line",
            "end_line",
            "line_number",
            "command",
            "content",
            "old_string",
            "new_string",
            "pattern",
            "encoding",
            "description",
        ]
    ),
    st.sampled_from(["view", "create", "str_replace", "x", 1, 5, [1, 9], [3, -1]]),
    max_size=3,
)


@settings(max_examples=examples(300), deadline=None)
@given(name=_TOOL_NAME, key=_PATH_KEY, other=_OTHER_ARGS)
@example(name="read_file", key="filepath", other={})
@example(name="Read", key="absolute_path", other={"offset": 5})
def test_whatever_the_tool_and_its_path_argument_both_readings_name_the_file_alike(
    name: str, key: str, other: dict[str, object]
) -> None:
    call = ToolCallPart("1", name, {key: "src/a.py", **other})
    strict = file_accesses([call])[0]
    loose = files_touched(call)
    if isinstance(strict, FileRead):
        assert loose == [("src/a.py", "read")]
    elif isinstance(strict, FileWrite):
        assert [path for path, action in loose if action != "read"] == ["src/a.py"]
    else:
        assert all(action == "read" for _, action in loose)


def test_a_tool_that_names_a_file_without_saying_it_reads_it_is_no_read() -> None:
    # A test run's output is not the file's lines: never deduplicated as one, its errors stay open.
    call = ToolCallPart("1", "run_tests", {"path": "tests/test_a.py"})
    assert file_accesses([call]) == [None]
    assert files_touched(call) == []


def test_the_summary_treats_every_path_argument_as_the_same_read() -> None:
    # A file whose text holds `error: ...` is quoted text, not a failure, whichever key names it.
    text = "1  # notes\n2  error: the old parser rejected this, kept for reference\n"
    for key in ("file_path", "filepath", "path", "absolute_path"):
        call = ToolCallPart("1", "read_file", {key: "notes.md"})
        history = [
            Message.user("task"),
            Message("assistant", (call,)),
            Message("tool", (ToolResultPart("1", "read_file", text),)),
        ]
        sections = parse_sections(ExtractiveSummarizer()(history))
        assert sections["Files touched"] == ["notes.md (read)"], key
        assert sections.get("Open errors", []) in ([], ["(none)"]), (key, sections.get("Open errors"))
    # The same text from a command that is not a read is an open error.
    failing = ToolCallPart("1", "bash", {"command": "python check.py"})
    history = [
        Message.user("task"),
        Message("assistant", (failing,)),
        Message("tool", (ToolResultPart("1", "bash", text),)),
    ]
    assert parse_sections(ExtractiveSummarizer()(history))["Open errors"] == [
        "[bash: python check.py] 2  error: the old parser rejected this, kept for reference"
    ]


@pytest.mark.parametrize(
    ("script", "prepared"),
    [
        # Quoted text is copied up to its closing quote (an escaped quote inside double quotes
        # does not close them); `#` starts a comment only at the start of a word.
        ('echo "a \\" b" \'c \\ d\' e#f #g\nls', 'echo "a \\" b" \'c \\ d\' e#f  ; ls'),
        (
            "cat > a.py << 'EOF'\nx = 'unclosed\nEOF\nsed -n 1,5p a.py 2>/dev/null",
            "cat > a.py  << EOF  ; sed -n 1,5p a.py  __HKFD2__ >/dev/null",
        ),
        ("python -c \"print('x; y')\" && wc -l b.txt # note", "python -c \"print('x; y')\" && wc -l b.txt "),
        ("echo 'never closed", None),
        ('echo "ends in a backslash \\', None),
        # A descriptor number only at the start of a word.
        ("x2>out 2>err a#b <in", "x2>out  __HKFD2__ >err a#b <in"),
    ],
)
def test_prepare_copies_quoted_text_and_words_in_runs_as_it_did_one_character_at_a_time(
    script: str, prepared: str | None
) -> None:
    """`_prepare` copies a quoted string or the rest of a word in one step; the outputs are the
    ones it gave copying a character at a time (recorded before the change)."""
    assert _prepare(script) == prepared
