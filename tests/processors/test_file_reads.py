"""One file-read recogniser: `file_accesses` (strict) and `files_touched` (the looser reading
summaries list) resolve a call's paths alike, so a file has one name in dedupe and in summaries."""

from __future__ import annotations

import posixpath

from hypothesis import given, settings
from hypothesis import strategies as st

from historykit.messages import Message, ToolCallPart
from historykit.processors.file_reads import FileRead, file_accesses, files_touched
from historykit.processors.summarizers import ExtractiveSummarizer, parse_sections


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


@settings(max_examples=200, deadline=None)
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


@settings(max_examples=300, deadline=None)
@given(_shell_text)
def test_whatever_the_shell_a_strict_read_is_a_file_the_looser_reading_names(command: str) -> None:
    call = bash(command)
    strict = file_accesses([call])[0]
    loose = files_touched(call)  # never raises, whatever the shell
    # (The looser reading lists only operands that look like paths: not `cat Makefile`, nor a
    # quoted `'a b.py'`; the generated commands quote nothing.)
    if isinstance(strict, FileRead) and ("." in strict.path or "/" in strict.path):
        assert (strict.path, "read") in loose
