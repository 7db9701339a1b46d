"""Recognising file reads and writes in tool calls, in the shapes coding agents use.

`file_accesses(calls)` maps each tool call of a history (in order) to what it did to a file: a
`FileRead` (which file, which lines), a `FileWrite` (which files it changed) or `None` (anything
else, or a call whose shape is not certain). Recognised out of the box:

- a tool whose arguments are a path (`path`, `file_path`, `filepath`, ...) and optionally a line
  range (`offset`/`limit` as Claude Code `Read` has them, `view_range`, `start_line`/`end_line`),
  and whose name says it reads (`Read`, `read_file`, `view_file`, `cat`, ...) and does not say
  it searches; a name or arguments that say it writes make it a write;
- editor tools with `command="view"` (`str_replace_editor`, the Anthropic text editor), and their
  `create`/`str_replace`/`insert`/`undo_edit` commands as writes;
- shell commands (`bash`, `shell`, `execute_bash`, Codex's `["bash", "-lc", ...]`): `cat`, `nl`,
  `head`, `tail`, `sed -n 'a,bp'`, after any `cd`, piped through `head`/`tail`/`sed -n`/`cat -n`;
  as writes: redirections, `sed -i`, `tee`, `cp`, `mv`, `rm`, `git checkout --`, `apply_patch`;
- SWE-agent `open <file> [<line>]` (a window of the file), `create`, and `edit`/`insert` (of the
  file the editor has open); OpenHands `open_file('<file>')`, `edit_file_by_replace`, ... .

A read is recognised only when its output is the file's lines and nothing else: `cat a | grep x`,
`echo x && cat a` or `cat a b` are not reads. Writes that go through programs (`python fix.py`)
cannot be seen.

Paths are normalised (`./a.py`, `a/../a.py` and `a.py` are one file); a relative path is joined
to the working directory the call states (`cd dir && ...`, Codex `workdir`); an absolute path is
made relative to `root` when one is given, so that absolute and relative spellings meet.

`files_touched(call)` is the looser reading a summary's "files touched" list wants: every file a
call names as read, written or edited (`cat a b`, `grep x a.py | head` name `a.py` as read), with
its paths resolved as `file_accesses` resolves them, so `cd src && sed -n 1,20p a.py` is
`src/a.py` to both (a shell `cd` changes the directory the next command runs in). Both readings
take which tools and arguments name a file from one vocabulary (this module's), so every read
`file_accesses` sees, `files_touched` names as read.

What a result says about its read: `read_failed` (an error, not the file), `read_is_partial` (the
agent's harness cut it: `[... omitted N of M lines ...]`), and `shown_extent` (an editor window
whose header states its lines becomes that line range). `FileAccessRecogniser` is
`file_accesses` remembering each call's verdict, for histories processed call after call.

Example:
    ```python
    from historykit import ToolCallPart
    from historykit.processors._file_reads import FileRead, file_accesses

    calls = [ToolCallPart("1", "bash", {"command": "cd /repo && sed -n '10,40p' src/a.py"})]
    assert file_accesses(calls, root="/repo") == [FileRead("src/a.py", 10, 40)]
    ```
"""

from __future__ import annotations

import ast
import posixpath
import re
import shlex
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from historykit._identity_cache import DEFAULT_CACHE_POLICY, CachePolicy, IdentityCache
from historykit._messages import ToolCallPart, ToolResultPart
from historykit._validate import check_int
from historykit.errors import ArgumentTypeError, InvalidArgumentError


@dataclass(frozen=True, slots=True)
class FileRead:
    """What one tool call read: a file, and which of its lines.

    `FileRead("a.py")` is the whole file; `FileRead("a.py", 10, 40)` lines 10 to 40;
    `FileRead("a.py", 10)` line 10 to the end; `FileRead("a.py", -30)` the last 30 lines.
    """

    path: str
    """The file's identity (a normalised path, or any key a `file_key` callable returns)."""
    start: int = 1
    """First line read (1-based); negative for the last `-start` lines (`tail -n 30`)."""
    end: int | None = None
    """Last line read (inclusive); `None` reads to the end of the file."""
    window: str | None = None
    """A view whose extent the call does not state (SWE-agent `open a.py 120` shows about 100
    lines around line 120): it covers only the same view, and a whole-file read covers it."""

    def __post_init__(self) -> None:
        if not isinstance(self.path, str) or not self.path:
            raise InvalidArgumentError(f"FileRead.path must be a non-empty string, got {self.path!r}")
        check_int("FileRead.start", self.start, minimum=None, what="a non-zero int")
        if self.start == 0:
            raise InvalidArgumentError(f"FileRead.start must be a non-zero int, got {self.start!r}")
        if self.end is not None:
            check_int("FileRead.end", self.end, minimum=None, what="an int or None")
            if self.start < 0 or self.end < self.start:
                raise InvalidArgumentError(
                    f"FileRead lines {self.start}-{self.end} of {self.path!r} are not a range"
                )

    @property
    def whole(self) -> bool:
        """True when the read is the whole file."""
        return self.start == 1 and self.end is None and self.window is None

    def covers(self, other: FileRead) -> bool:
        """True when this read shows every line `other` showed (same file assumed)."""
        if self.whole:
            return True
        if self.window is not None or other.window is not None:
            return self == other
        if self.start < 0 or other.start < 0:
            # The last N lines cover the last M <= N; nothing else is known without the file's length.
            return self.start < 0 and other.start < 0 and self.start <= other.start
        if self.start > other.start:
            return False
        return self.end is None or (other.end is not None and other.end <= self.end)

    def describe(self) -> str:
        """The read in words, for notices: `lines 10-40 of src/a.py`."""
        if self.window is not None:
            return f"{self.path} ({self.window})"
        if self.start < 0:
            return f"the last {-self.start} lines of {self.path}"
        if self.end is None:
            return self.path if self.start == 1 else f"{self.path} from line {self.start}"
        if self.end == self.start:
            return f"line {self.start} of {self.path}"
        return f"lines {self.start}-{self.end} of {self.path}"


@dataclass(frozen=True, slots=True)
class FileWrite:
    """A tool call that changed files (wrote, edited, moved or deleted them)."""

    paths: tuple[str, ...]
    """The files' identities, normalised like `FileRead.path`."""

    def __post_init__(self) -> None:
        if isinstance(self.paths, str) or not all(isinstance(p, str) and p for p in self.paths):
            raise InvalidArgumentError(
                f"FileWrite.paths must be a tuple of non-empty strings, got {self.paths!r}"
            )


FileAccess = FileRead | FileWrite
"""What a tool call did to a file: read it (`FileRead`) or changed files (`FileWrite`)."""

FileKey = Callable[[ToolCallPart], FileRead | FileWrite | str | None]
"""A user's recogniser: a tool call -> a `FileRead`, a `FileWrite`, a path (a whole-file read) or
`None` to leave the call to the built-in shapes."""


def normalize_path(path: str, cwd: str | None = None, root: str | None = None) -> str | None:
    """One spelling per file: `./a.py`, `a/../a.py` -> `a.py`; relative to `cwd` when given;
    absolute paths under `root` made relative to it. `None` for an empty path."""
    path = path.strip()
    if not path:
        return None
    if cwd and not posixpath.isabs(path):
        path = posixpath.join(cwd, path)
    path = posixpath.normpath(path)
    if root:
        base = posixpath.normpath(root)
        if path == base:
            return "."
        if posixpath.isabs(path) and path.startswith(base.rstrip("/") + "/"):
            return path[len(base.rstrip("/")) + 1 :]
    return path


def file_accesses(
    calls: Sequence[ToolCallPart],
    *,
    root: str | None = None,
    file_key: FileKey | None = None,
    builtin: bool = True,
) -> list[FileAccess | None]:
    """What each call (in history order) did to a file; `None` where it was nothing recognisable.

    `file_key` is asked first; where it returns `None` the built-in shapes are tried (unless
    `builtin` is false). Calls are taken in order because SWE-agent's `edit` changes the file its
    editor last opened.
    """
    return FileAccessRecogniser(root=root, file_key=file_key, builtin=builtin)(calls)


class FileAccessRecogniser:
    """`file_accesses` with a memory: a call's verdict is kept (calls never change, and `file_key`
    must be a function of the call alone), so a history that grew costs only its new calls.

    Example:
        ```python
        recognise = FileAccessRecogniser(root="/repo")
        accesses = recognise([c for m in messages for c in m.tool_calls])
        ```
    """

    def __init__(
        self,
        *,
        root: str | None = None,
        file_key: FileKey | None = None,
        builtin: bool = True,
        cache_policy: CachePolicy = DEFAULT_CACHE_POLICY,
    ) -> None:
        self.root = root
        self.file_key = file_key
        self.builtin = builtin
        self.cache_policy = cache_policy
        """Bounds the remembered verdicts when a call does not give a policy of its own."""
        self._verdicts: IdentityCache[_Verdict] = IdentityCache()

    def __call__(
        self, calls: Sequence[ToolCallPart], cache_policy: CachePolicy | None = None
    ) -> list[FileAccess | None]:
        """What each call did to a file; `cache_policy` (a processor's `ProcessContext`'s) bounds
        the verdicts remembered, else the recogniser's own."""
        return self.carry_on(calls, [], None, cache_policy)[0]

    def carry_on(
        self,
        calls: Sequence[ToolCallPart],
        out: list[FileAccess | None],
        open_path: str | None,
        cache_policy: CachePolicy | None = None,
    ) -> tuple[list[FileAccess | None], str | None]:
        """What each of `calls` did to a file, appended to `out` (the accesses of the calls before
        them), with `open_path` the file SWE-agent's editor had open after those; returns `out` and
        the file open after `calls`. So a history that grew is recognised from where it was."""
        verdicts = self._verdicts
        policy = cache_policy or self.cache_policy
        for call in calls:
            verdict = verdicts.get(call)
            if verdict is None:
                verdict = verdicts.put(call, self._verdict(call), policy)
            access = verdict.access
            if verdict.edits_open_file:
                access = FileWrite((open_path,)) if open_path else None
            if verdict.opens is not None:
                open_path = verdict.opens
            out.append(access)
        return out, open_path

    def _verdict(self, call: ToolCallPart) -> _Verdict:
        if self.file_key is not None:
            found = _from_user(call, self.file_key, self.root)
            if found is not None:
                return _Verdict(found)
        if not self.builtin:
            return _NOTHING
        try:
            return _builtin(call, self.root)
        except (ValueError, TypeError, RecursionError):
            # A call we misjudge is a call we do not recognise: never guess a file.
            return _NOTHING


def read_failed(part: ToolResultPart) -> bool:
    """True when a read's result is an error rather than the file (it is never deduplicated)."""
    if part.is_error:
        return True
    text = part.content.lstrip()
    head = text[:400]
    if _ERROR_START.match(head) or "<tool_use_error>" in head:
        return True
    code = _RETURNCODE.match(head)
    if code is not None and code.group(1) != "0":
        return True
    return len(text) < 400 and _ERROR_PHRASE.search(text) is not None


def read_is_partial(part: ToolResultPart) -> bool:
    """True when the agent's harness cut the output (it is not the whole of what was asked)."""
    content = part.content
    if content.startswith("Total output lines: "):  # Codex, before an `[... omitted ...]` cut
        return True
    # Substring checks first: they are much cheaper than a regex over a long file.
    return any(cue in content for cue in _TRUNCATION_CUES) and _TRUNCATION.search(content) is not None


def shown_extent(read: FileRead, part: ToolResultPart) -> FileRead:
    """The read as its result shows it: an editor window (SWE-agent `open`, OpenHands `open_file`)
    states its lines in its header (`[File: a.py (372 lines total)]`, `(272 more lines above)`,
    `(41 more lines below)`), so a window becomes a line range, or the whole file."""
    if read.window is None:
        return read
    content = part.content
    header = _WINDOW_HEADER.match(content)
    if header is None:
        return read
    above = int(header.group(2) or 0)
    below = _MORE_BELOW.search(content[-400:])
    start = above + 1
    if below is None:
        return FileRead(read.path, start)
    end = int(header.group(1)) - int(below.group(1))
    return FileRead(read.path, start, end) if end >= start else read


_WINDOW_HEADER = re.compile(
    r"\[File: [^\n]*?\((\d+) lines total\)\]\r?\n(?:\((\d+) more lines above\)\r?\n)?"
)
_MORE_BELOW = re.compile(r"\((\d+) more lines below\)")
_ERROR_START = re.compile(
    r"(ERROR:|Error:|error:|<system-reminder>Warning: the file exists but is shorter"
    r"|File content \(.{0,40}\) exceeds|EISDIR|ENOENT|Traceback \(most recent call last\))"
)
_RETURNCODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_ERROR_PHRASE = re.compile(
    r"No such file or directory|does not exist|Is a directory|EISDIR|ENOENT|Permission denied"
    r"|[Cc]an(?:no|')t (?:open|read)|not found|exceeds maximum allowed",
)
_TRUNCATION_CUES = (
    "omitted ",
    "characters truncated]",
    "<elided_chars>",
    "<response clipped>",
    "was too long",
)
_TRUNCATION = re.compile(
    r"\[\.\.\. omitted \d+ of \d+ lines|\[\d+ characters truncated\]|<elided_chars>|<response clipped>"
    r"|output of your last command was too long"
)


Touch = Literal["read", "written", "edited"]
"""What a call did to a file it names, as a summary lists it."""


# --- the vocabulary: which tools and arguments name a file --------------------------------
# Both readings (`file_accesses`, strict, and `files_touched`, looser) judge a call by these, so
# a file read is one thing to dedupe, to summaries and to their "Open errors".

_PATH_KEYS = (
    "file_path",
    "path",
    "filepath",
    "filename",
    "file",
    "target_file",
    "absolute_path",
    "notebook_path",
)
"""The arguments that name the file a tool works on, the first given one winning."""
_RANGE_KEYS = frozenset({"offset", "limit", "view_range", "start_line", "end_line", "line_number"})
_NEUTRAL_KEYS = frozenset({"description", "encoding"})
_CWD_KEYS = ("workdir", "cwd", "working_directory")
_WRITE_KEYS = frozenset(
    {
        "content",
        "contents",
        "file_text",
        "new_string",
        "old_string",
        "new_str",
        "old_str",
        "edits",
        "text",
        "insert_line",
        "new_content",
        "new_source",
        "patch",
        "diff",
        "replace",
        "search",
    }
)
_WRITE_NAME = re.compile(
    r"write|edit|creat|insert|replac|delet|remov|append|patch|move|renam|mkdir|save|upload|update|apply|undo",
    re.IGNORECASE,
)
_NEW_FILE_NAME = re.compile(r"write|creat|save", re.IGNORECASE)
"""Of the writing names, those that write a whole file (a summary lists it "written", not "edited")."""
_SEARCH_NAME = re.compile(r"grep|glob|search|find|list|tree|(?:^|_)ls(?:$|_)|dir", re.IGNORECASE)
_READ_NAME = re.compile(r"read|view|open|(?:^|_)(?:cat|show)(?:$|_)|(?:get|load|fetch)_?file", re.IGNORECASE)
"""A name that says the tool shows a file (`Read`, `read_file`, `view_file`, `open`, `cat`): a tool
that names a file but not what it does with it (`run_tests(path=...)`) is not a read."""
_EDITOR_WRITES = frozenset(
    {"create", "str_replace", "insert", "undo_edit", "write", "edit", "append", "delete"}
)
_SHELL_READ_COMMANDS = frozenset({"cat", "nl", "head", "tail"})
"""Programs whose output is their file operand's lines (and `sed -n 'a,bp'`, judged apart)."""


def _plain_operand(token: str) -> bool:
    """A shell operand both readings take as one file's name: not an option, no glob (`*.py`: which
    files, the shell decides), no command substitution, no quote or operator left in it (the
    remains of shell we did not parse). A variable stays (`$TMPDIR/task.output`, as Claude Code
    reads a background task's output): the same spelling names the same file in one session."""
    return bool(token) and not token.startswith("-") and not any(c in token for c in "*?[`|;&<>(){}\"'")


def _path_argument(args: dict[str, Any]) -> str | None:
    """The file a tool's arguments name (`file_path`, `path`, `filepath`, ...); None if none."""
    return next((v for k in _PATH_KEYS if isinstance(v := args.get(k), str) and v.strip()), None)


def _path_tool_touch(name: str, args: dict[str, Any]) -> Touch | None:
    """What a tool whose arguments name a file does to it, by its name and arguments: an editor's
    `command` (`view` reads, `create` writes, ...), else a name or arguments that write, else a
    name that reads and does not search; None when neither says (`run_tests(path=...)`)."""
    command = args.get("command")
    if isinstance(command, str):
        if command == "view":
            return "read"
        if command in ("create", "write"):
            return "written"
        return "edited" if command in _EDITOR_WRITES else None
    keys = set(args) - set(_PATH_KEYS) - set(_CWD_KEYS)
    if _WRITE_NAME.search(name) or keys & _WRITE_KEYS:
        return "written" if _NEW_FILE_NAME.search(name) else "edited"
    if _SEARCH_NAME.search(name) or not _READ_NAME.search(name):
        return None
    return "read"


# --- files a call names (the looser reading, for summaries) ----------------------------------

_SHELL_READERS = _SHELL_READ_COMMANDS | {"less", "more", "open"}
"""The programs whose file operands the looser reading names as read: the strict reading's (`sed`
is judged apart), and pagers and SWE-agent's `open`, whose output is the file too."""
_SHELL_TOOLS = frozenset({"bash", "shell", "sh", "terminal", "execute_bash"})
_OPEN_FILE = re.compile(r"open_file\(\s*['\"]([^'\"]+)['\"]")
_LOOSE_REDIRECT = re.compile(r"(?<![<>&\d])>{1,2}\s*([\w./~-][^\s;&|<>]*)")


def shell_text(call: ToolCallPart) -> str | None:
    """The shell command a call ran (a `command`/`cmd`/`code`/`script` argument, the last word of
    Codex's `["bash", "-lc", text]`, or a shell tool's raw text); `None` for other calls."""
    args = call.arguments
    if isinstance(args, str):
        return args if call.name.lower() in _SHELL_TOOLS else None
    for key in ("command", "cmd", "code", "script"):
        value = args.get(key)
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            value = value[-1]
        if isinstance(value, str):
            # A script `ClearToolResults` cleared is no script: its placeholder quotes the first
            # line, which may read as a command (`cat > a.py <<EOF`) that is no longer there.
            return None if _is_cleared(value) else value
    return None


def _is_cleared(value: str) -> bool:
    return value.startswith(CLEARED_HEAD) and value.endswith(CLEARED_TAIL) and "\n" not in value


def files_touched(call: ToolCallPart, *, root: str | None = None) -> list[tuple[str, Touch]]:
    """Every file `call` names as read, written or edited, in the order named: the looser reading
    a summary's "files touched" wants (`file_accesses` is the strict one: a read only when the
    output is the file's lines and nothing else).

    Paths are resolved as `file_accesses` resolves them: relative to the directory the call states
    (`cd dir && ...`, Codex `workdir`), absolute ones under `root` made relative to it.

    Example:
        ```python
        call = ToolCallPart("1", "bash", {"command": "cd src && sed -n 1,20p a.py"})
        assert files_touched(call) == [("src/a.py", "read")]
        ```
    """
    args = call.arguments_dict()
    cwd = next((v for k in _CWD_KEYS if isinstance(v := args.get(k), str) and v), None)
    found: list[tuple[str, Touch]] = []
    path = _path_argument(args)
    # Looser than `file_accesses`: a tool whose name says it reads names its file as read whatever
    # else its arguments ask (`read_file(path, pattern=...)`).
    touch = None if path is None else _path_tool_touch(call.name, args)
    if path is not None and touch is not None:
        found.append((normalize_path(path, cwd, root) or path, touch))
    script = shell_text(call)
    if script:
        found.extend(_shell_touches(script, cwd, root))
    return found


def _shell_touches(script: str, cwd: str | None, root: str | None) -> list[tuple[str, Touch]]:
    found: list[tuple[str, Touch]] = [
        (normalize_path(m.group(1), cwd, root) or m.group(1), "edited")
        for m in _PATCH_HEADER.finditer(script)
    ]
    found.extend((normalize_path(m, cwd, root) or m, "read") for m in _OPEN_FILE.findall(script))
    prepared = _prepare(script)
    tokens = None if prepared is None else shell_tokens(prepared)
    parsed = None if tokens is None else _parse(tokens)
    if parsed is None:
        # Shell we do not model (an unclosed quote, a subshell): the words as they stand, in no
        # known directory.
        for segment in re.split(r"&&|\|\||;|\||\n", script):
            words = shell_tokens(segment, operators=False) or segment.split()
            redirects = [t for t in _LOOSE_REDIRECT.findall(segment)]
            found.extend(_command_touches(words, redirects, lambda p: normalize_path(p, root=root) or p))
        return found
    for here, known, pipeline in _walk_cwd(parsed, cwd):

        def resolve(path: str, here: str | None = here, known: bool = known) -> str:
            return normalize_path(path, here if known else None, root) or path

        for simple in pipeline:
            found.extend(_command_touches(simple.words, simple.stdout_to, resolve))
    return found


def _command_touches(
    words: list[str], redirects: list[str], resolve: Callable[[str], str]
) -> list[tuple[str, Touch]]:
    """The files one simple command names: read by a reader (`cat`, `sed` without `-i`, ...),
    edited by `sed -i`, written by `create`/`touch` or a redirection."""
    found: list[tuple[str, Touch]] = []
    if words:
        program, rest = posixpath.basename(words[0]), words[1:]
        operands = [w for w in rest if _looks_like_path(w)]
        if program in _SHELL_READERS and operands:
            found.extend((resolve(w), "read") for w in operands)
        elif program == "sed" and operands:
            found.append(
                (resolve(operands[-1]), "edited" if any(w.startswith("-i") for w in rest) else "read")
            )
        elif program in ("create", "touch") and operands:
            found.extend((resolve(w), "written") for w in operands)
    for target in redirects:
        if _looks_like_path(target) and not target.startswith("/dev/"):
            found.append((resolve(target), "written"))
    return found


def _looks_like_path(token: str) -> bool:
    """An operand the looser reading names: a plain one (`_plain_operand`) spelled like a path."""
    return _plain_operand(token) and ("." in token or "/" in token)


# --- user recogniser -------------------------------------------------------------------------


def _from_user(call: ToolCallPart, file_key: FileKey, root: str | None) -> FileAccess | None:
    found = file_key(call)
    if found is None:
        return None
    if isinstance(found, str):
        path = normalize_path(found, root=root)
        if path is None:
            raise InvalidArgumentError(
                f"file_key returned an empty path for tool call {call.id!r} ({call.name})"
            )
        return FileRead(path)
    if isinstance(found, FileRead):
        path = normalize_path(found.path, root=root) or found.path
        return found if path == found.path else FileRead(path, found.start, found.end, found.window)
    if isinstance(found, FileWrite):
        return FileWrite(tuple(normalize_path(p, root=root) or p for p in found.paths))
    raise ArgumentTypeError(
        f"file_key returned a {type(found).__module__}.{type(found).__qualname__} for tool call "
        f"{call.id!r} ({call.name}); expected a FileRead, a FileWrite, a path or None"
    )


# --- built-in shapes -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Verdict:
    """What one call does, before SWE-agent's editor state is known."""

    access: FileAccess | None
    opens: str | None = None
    """SWE-agent `open`/`create`: the file the editor has open from now on."""
    edits_open_file: bool = False
    """SWE-agent `edit`/`insert`: changes the file the editor has open."""


_NOTHING = _Verdict(None)


_SWE_AGENT_EDITS = frozenset({"edit", "insert", "append"})


CLEARED_HEAD = "[cleared from the history: "
"""How a value `ClearToolResults` cleared starts..."""
CLEARED_TAIL = "; the call was made with the full value]"
"""...and ends; a record of the change it held comes just before the tail: ``added `line` ``."""
_CLEARED_WRITE = re.compile(
    r"\[cleared from the history: [\d,]+ tokens(?: beginning `[^`\n]*`)? of a call that wrote (.+?)"
    r"(?:, which added `.*`)?; "
    r"the call was made with the full value\]"
)
"""`ClearToolResults`' placeholder for a value that held the only mention of the files a call wrote
(with or without the record of what the write added)."""


def _cleared_write(args: dict[str, Any], root: str | None) -> FileWrite | None:
    """The files a call whose script or patch was cleared from the history says it wrote."""
    values = [v for value in args.values() for v in (value if isinstance(value, list) else [value])]
    for value in values:
        if isinstance(value, str) and value.startswith(CLEARED_HEAD):
            match = _CLEARED_WRITE.fullmatch(value)
            if match is not None:
                named = (normalize_path(path, root=root) for path in match.group(1).split(", "))
                paths = [path for path in named if path]
                return FileWrite(tuple(paths)) if paths else None
    return None


def _builtin(call: ToolCallPart, root: str | None) -> _Verdict:
    args = call.arguments_dict()
    if not args and isinstance(call.arguments, str):
        return _Verdict(_raw_patch(call.arguments, None, root))  # Codex's freeform `apply_patch`
    cleared = _cleared_write(args, root)
    if cleared is not None:
        return _Verdict(cleared)
    name = call.name
    lowered = name.lower()
    path_value = _path_argument(args)
    if lowered in ("open", "create") or (lowered in _SWE_AGENT_EDITS and path_value is None):
        return _swe_agent(lowered, args, path_value, root)
    return _Verdict(_tool_access(call, args, path_value, root))


def _tool_access(
    call: ToolCallPart, args: dict[str, Any], path_value: str | None, root: str | None
) -> FileAccess | None:
    name = call.name
    cwd = next((v for k in _CWD_KEYS if isinstance(v := args.get(k), str) and v), None)
    code = args.get("code")
    if isinstance(code, str) and path_value is None:
        return _ipython(code, root)
    command = args.get("command")
    editor = isinstance(command, str) and path_value is not None  # `str_replace_editor`, ...
    script = None if editor else _shell_script(command if command is not None else args.get("cmd"))
    if script is not None:
        return _shell(script, cwd, root)
    if path_value is None:
        return None
    path = normalize_path(path_value, cwd, root)
    touch = _path_tool_touch(name, args)
    if path is None or touch is None:
        return None
    if touch != "read":
        return FileWrite((path,))
    if not editor:
        keys = set(args) - set(_PATH_KEYS) - set(_CWD_KEYS)
        if not keys <= _RANGE_KEYS | _NEUTRAL_KEYS:
            return None  # more than a range (a pattern, ...): its output is not the file's lines
        if "line_number" in args:
            return None  # a window around a line, of a tool we do not know: its extent is a guess
    lines = _arg_range(args)
    return None if lines is None else FileRead(path, *lines)


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        return int(value)
    return None


def _arg_range(args: dict[str, Any]) -> tuple[int, int | None] | None:
    """(start, end) from `view_range`, `offset`/`limit` or `start_line`/`end_line`; None if malformed."""
    if "view_range" in args and args["view_range"] is not None:
        view = args["view_range"]
        if not isinstance(view, (list, tuple)) or not 1 <= len(view) <= 2:
            return None
        first = _int(view[0])
        last = _int(view[1]) if len(view) == 2 else -1
        if first is None or last is None:
            return None
        first = max(first, 1)
        if last == -1:
            return first, None
        return (first, last) if last >= first else None
    if "start_line" in args or "end_line" in args:
        first = _int(args.get("start_line", 1))
        last = _int(args["end_line"]) if args.get("end_line") is not None else None
        if first is None or ("end_line" in args and args["end_line"] is not None and last is None):
            return None
        first = max(first, 1)
        return (first, last) if last is None or last >= first else None
    offset = args.get("offset")
    limit = args.get("limit")
    first = 1 if offset is None else _int(offset)
    count = None if limit is None else _int(limit)
    if first is None or (limit is not None and (count is None or count <= 0)):
        return None
    # Claude Code's `Read` counts `offset` from 1 (its results start with that line number).
    first = max(first, 1)
    return first, (None if count is None else first + count - 1)


# --- SWE-agent and OpenHands -----------------------------------------------------------------


def _swe_agent(name: str, args: dict[str, Any], path_value: str | None, root: str | None) -> _Verdict:
    line: int | None = None
    command = args.get("command")
    if path_value is None and isinstance(command, str):
        # Text-action form: the whole action is the command (`open a.py 293`, `edit 1:5\n...`).
        first_line = command.split("\n", 1)[0]
        try:
            words = shlex.split(first_line)
        except ValueError:
            return _NOTHING
        if not words or words[0] != name:
            return _NOTHING
        if name in _SWE_AGENT_EDITS:
            words = words[:1]
        if len(words) >= 2:
            path_value = words[1]
        if len(words) >= 3:
            line = _int(words[2])
            if line is None:
                return _NOTHING
        if len(words) > 3:
            return _NOTHING
    elif "line_number" in args:
        line = _int(args["line_number"])
        if line is None:
            return _NOTHING
    if name in _SWE_AGENT_EDITS:
        return _Verdict(None, edits_open_file=True)
    if path_value is None:
        return _NOTHING
    path = normalize_path(path_value, root=root)
    if path is None:
        return _NOTHING
    if name == "create":
        return _Verdict(FileWrite((path,)), opens=path)
    return _Verdict(
        FileRead(path, window="open at the top" if line is None else f"open at line {line}"), opens=path
    )


_IPYTHON_WRITES = frozenset({"edit_file_by_replace", "insert_content_at_line", "append_file", "create_file"})


def _ipython(code: str, root: str | None) -> FileAccess | None:
    """OpenHands' IPython tools: `open_file('a.py')` reads a window; the file helpers write."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None
    written: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _IPYTHON_WRITES:
            target = _first_str_arg(node, ("file_name", "filename", "path"))
            if target is not None and (path := normalize_path(target, root=root)) is not None:
                written.append(path)
    if written:
        return FileWrite(tuple(dict.fromkeys(written)))
    body = tree.body
    if len(body) != 1 or not isinstance(body[0], ast.Expr) or not isinstance(body[0].value, ast.Call):
        return None
    call = body[0].value
    if not isinstance(call.func, ast.Name) or call.func.id != "open_file":
        return None
    target = _first_str_arg(call, ("path", "file_name", "filename"))
    path = None if target is None else normalize_path(target, root=root)
    if path is None:
        return None
    extra = [ast.unparse(a) for a in call.args[1:]] + [
        f"{k.arg}={ast.unparse(k.value)}" for k in call.keywords
    ]
    extra = [e for e in extra if not e.startswith(("path=", "file_name=", "filename="))]
    return FileRead(path, window="open_file(" + ", ".join(extra) + ")" if extra else "open_file at the top")


def _first_str_arg(node: ast.Call, names: tuple[str, ...]) -> str | None:
    if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
        return node.args[0].value
    for keyword in node.keywords:
        if (
            keyword.arg in names
            and isinstance(keyword.value, ast.Constant)
            and isinstance(keyword.value.value, str)
        ):
            return keyword.value.value
    return None


# --- shell -----------------------------------------------------------------------------------

_SHELLS = frozenset({"bash", "sh", "zsh", "dash"})


def _shell_script(command: Any) -> str | None:
    """The shell text of a `command`/`cmd` argument (a string, or Codex's `["bash", "-lc", text]`);
    `None` for a script `ClearToolResults` cleared (see `shell_text`)."""
    if isinstance(command, str):
        return None if _is_cleared(command) else command
    if isinstance(command, list) and command and all(isinstance(c, str) for c in command):
        if any(_is_cleared(c) for c in command):
            return None
        if (
            len(command) >= 3
            and posixpath.basename(command[0]) in _SHELLS
            and command[1] in ("-c", "-lc", "-cl")
        ):
            return command[2] if len(command) == 3 else None
        return shlex.join(command)
    return None


_PATCH_HEADER = re.compile(r"^\*\*\* (?:Update File|Add File|Delete File|Move to): (.+?)\s*$", re.MULTILINE)


def _raw_patch(text: str, cwd: str | None, root: str | None) -> FileWrite | None:
    if "*** Begin Patch" not in text:
        return None
    paths = [p for m in _PATCH_HEADER.finditer(text) if (p := normalize_path(m.group(1), cwd, root))]
    return FileWrite(tuple(dict.fromkeys(paths))) if paths else None


@dataclass
class _Simple:
    """One simple command of a pipeline: its words and redirections."""

    words: list[str] = field(default_factory=list)
    stdout_to: list[str] = field(default_factory=list)
    """Where standard output goes (files and /dev/null)."""
    other_writes: list[str] = field(default_factory=list)
    """Files written through other descriptors (`2>log`)."""
    stdin_from: str | None = None


_Pipeline = list[_Simple]
_SEPARATORS = frozenset({"&&", "||", ";", "&", ";;"})
_OUT_OPS = frozenset({">", ">>", ">|", "&>", "&>>", ">&"})
_FD = re.compile(r"__HKFD(\d+)__")


def _shell(script: str, cwd: str | None, root: str | None) -> FileAccess | None:
    patch = _raw_patch(script, cwd, root)
    if patch is not None:
        return patch
    prepared = _prepare(script)
    if prepared is None:
        return None
    tokens = shell_tokens(prepared)
    if tokens is None:
        return None
    parsed = _parse(tokens)
    if parsed is None:
        return None
    writes = _writes(parsed, cwd, root)
    if writes:
        return FileWrite(tuple(dict.fromkeys(writes)))
    return _read(parsed, cwd, root)


# shlex's whitespace is these four characters; its punctuation (runs form one operator) is `();<>|&`.
_WITH_OPERATORS = re.compile(
    r"""[ \t\r\n]+|(?P<op>[();<>|&]+)|(?P<word>(?:[^ \t\r\n();<>|&'"]+|'[^']*'|"[^"]*")+)"""
)
_WORDS_ONLY = re.compile(r"""[ \t\r\n]+|(?P<op>(?!))|(?P<word>(?:[^ \t\r\n'"]+|'[^']*'|"[^"]*")+)""")
_QUOTED = re.compile(r"'([^']*)'|\"([^\"]*)\"")


def shell_tokens(script: str, *, operators: bool = True) -> list[str] | None:
    """The words (and, with `operators`, the operators) of a shell script as POSIX `shlex` gives
    them; `None` when its quoting is unbalanced.

    A script without a backslash (most commands an agent runs) is split by one regular expression,
    which gives the same tokens as `shlex` at a fraction of its cost: on a long history `shlex`
    was most of a first call's time.
    """
    if "\\" not in script:
        tokens = _split_unescaped(script, _WITH_OPERATORS if operators else _WORDS_ONLY)
        if tokens is not None:
            return tokens
    lexer = shlex.shlex(script, posix=True, punctuation_chars=operators)
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:
        return None


def _split_unescaped(script: str, pattern: re.Pattern[str]) -> list[str] | None:
    tokens: list[str] = []
    pos, end = 0, len(script)
    while pos < end:
        match = pattern.match(script, pos)
        if match is None:  # an unclosed quote: let shlex say so
            return None
        if match["op"] is not None:
            tokens.append(match["op"])
        elif match["word"] is not None:
            word = match["word"]
            tokens.append(_QUOTED.sub(_unquote, word) if ("'" in word or '"' in word) else word)
        pos = match.end()
    return tokens


def _unquote(match: re.Match[str]) -> str:
    return match[1] if match[1] is not None else match[2]


_SINGLE_QUOTED_END = re.compile(r"'")
_DOUBLE_QUOTED_END = re.compile(r'["\\]')
_PLAIN_RUN = re.compile(r"[^'\"\\\n< \t;|&()]+")
"""Characters `_prepare` copies as they are inside a word (where a digit or `#` is plain): none
that opens a quote, escapes, ends a line, may start a heredoc, or ends the word."""


def _prepare(script: str) -> str | None:
    """Make a script safe to tokenise: heredoc bodies dropped, comments dropped, unquoted newlines
    turned into `;`, and a redirection's descriptor number (`2>`) marked so it is not an operand."""
    out: list[str] = []
    i, n = 0, len(script)
    quote: str | None = None
    heredocs: list[tuple[str, bool]] = []
    word_start = True
    while i < n:
        if quote is not None:
            # Up to the closing quote (or, in double quotes, a backslash) in one step.
            stop = (_SINGLE_QUOTED_END if quote == "'" else _DOUBLE_QUOTED_END).search(script, i)
            if stop is None:
                out.append(script[i:])
                break
            k = stop.start()
            out.append(script[i : k + 1])
            i = k + 1
            if script[k] == quote:
                quote = None
            elif i < n:  # a backslash in double quotes: the character after it is taken as it is
                out.append(script[i])
                i += 1
            continue
        plain = None if word_start else _PLAIN_RUN.match(script, i)
        if plain is not None:
            # Inside a word, a run of characters that only append themselves, in one step.
            out.append(plain[0])
            i = plain.end()
            continue
        ch = script[i]
        if ch in "'\"":
            quote = ch
            out.append(ch)
            word_start = False
            i += 1
            continue
        if ch == "\\" and i + 1 < n:
            if script[i + 1] != "\n":  # a line continuation joins the lines
                out.append(script[i : i + 2])
                word_start = False
            i += 2
            continue
        if ch == "#" and word_start:
            while i < n and script[i] != "\n":
                i += 1
            continue
        if ch == "\n":
            out.append(" ; ")
            i += 1
            for delimiter, strip_tabs in heredocs:
                while i < n:
                    end = script.find("\n", i)
                    line = script[i : n if end == -1 else end]
                    i = n if end == -1 else end + 1
                    if (line.lstrip("\t") if strip_tabs else line).rstrip() == delimiter:
                        break
            heredocs = []
            word_start = True
            continue
        if script.startswith("<<", i) and not script.startswith("<<<", i):
            k = i + 2
            strip_tabs = k < n and script[k] == "-"
            k += strip_tabs
            while k < n and script[k] in " \t":
                k += 1
            match = re.match(r"'([^']*)'|\"([^\"]*)\"|([^\s;|&<>()]+)", script[k:])
            if match is None:
                return None
            delimiter = next(g for g in match.groups() if g is not None)
            heredocs.append((delimiter.replace("\\", ""), strip_tabs))
            out.append(" << " + shlex.quote(delimiter) + " ")
            i = k + match.end()
            word_start = True
            continue
        if ch.isdigit() and word_start:
            k = i
            while k < n and script[k].isdigit():
                k += 1
            if k < n and script[k] in "<>":
                out.append(f" __HKFD{script[i:k]}__ ")
                i = k
                word_start = True
                continue
        out.append(ch)
        word_start = ch in " \t;|&()"
        i += 1
    return None if quote is not None else "".join(out)


def _parse(tokens: list[str]) -> list[tuple[str, _Pipeline]] | None:
    """Pipelines with the separator before each (`""` for the first); None on shell we do not model."""
    out: list[tuple[str, _Pipeline]] = []
    separator = ""
    pipeline: _Pipeline = [_Simple()]
    fd: int | None = None
    it = iter(tokens)
    for token in it:
        fd_match = _FD.fullmatch(token)
        if fd_match:
            fd = int(fd_match.group(1))
            continue
        current = pipeline[-1]
        if token in _SEPARATORS:
            out.append((separator, pipeline))
            separator, pipeline, fd = token, [_Simple()], None
        elif token in ("|", "|&"):
            pipeline.append(_Simple())
            fd = None
        elif token in _OUT_OPS:
            target = next(it, None)
            if target is None:
                return None
            if token == ">&" and (target.isdigit() or target == "-"):
                if fd in (None, 1) and target != "1":
                    current.stdout_to.append("/dev/null" if target == "-" else f"&{target}")
            elif fd in (None, 1) or token.startswith("&"):
                current.stdout_to.append(target)
            else:
                current.other_writes.append(target)
            fd = None
        elif token in ("<", "<<", "<<<"):
            source = next(it, None)
            if source is None:
                return None
            if token == "<":
                current.stdin_from = source
            elif token == "<<":
                current.stdin_from = "<<heredoc>>"
            else:
                current.stdin_from = "<<string>>"
            fd = None
        elif token in ("(", ")", "{", "}"):
            continue
        elif token and token[0] in "|&;<>()":
            return None
        else:
            current.words.append(token)
            fd = None
    out.append((separator, pipeline))
    return [
        (sep, [s for s in p if s.words or s.stdout_to or s.stdin_from])
        for sep, p in out
        if any(s.words for s in p)
    ]


def _walk_cwd(
    parsed: list[tuple[str, _Pipeline]], cwd: str | None
) -> Iterator[tuple[str | None, bool, _Pipeline]]:
    """Each pipeline with the working directory it runs in, and whether that directory is known."""
    known = True
    for _, pipeline in parsed:
        yield cwd, known, pipeline
        if len(pipeline) == 1 and pipeline[0].words and pipeline[0].words[0] == "cd":
            words = pipeline[0].words
            target = words[1] if len(words) == 2 else None
            if target is None or target.startswith(("~", "-", "$")):
                known, cwd = False, None
            elif posixpath.isabs(target):
                cwd = posixpath.normpath(target)
            elif known:
                cwd = posixpath.normpath(posixpath.join(cwd, target)) if cwd else posixpath.normpath(target)


def _resolve(path: str, cwd: str | None, known: bool, root: str | None) -> str | None:
    if path == "/dev/null" or path.startswith("&") or (not known and not posixpath.isabs(path)):
        return None
    return normalize_path(path, cwd, root)


def _writes(parsed: list[tuple[str, _Pipeline]], cwd: str | None, root: str | None) -> list[str]:
    found: list[str] = []
    for here, known, pipeline in _walk_cwd(parsed, cwd):
        for simple in pipeline:
            targets = simple.stdout_to + simple.other_writes + _command_writes(simple.words)
            found.extend(p for t in targets if (p := _resolve(t, here, known, root)) is not None)
    return found


def _command_writes(words: list[str]) -> list[str]:
    if not words:
        return []
    name = posixpath.basename(words[0])
    args = words[1:]
    operands = [a for a in args if not a.startswith("-")]
    if name == "sed" and any(a == "-i" or a.startswith(("-i", "--in-place")) for a in args):
        return _sed_files(args)
    if name == "tee":
        return operands
    if name in ("cp", "install") and len(operands) >= 2:
        dest = operands[-1]
        return [dest] + [posixpath.join(dest, posixpath.basename(s)) for s in operands[:-1]]
    if name == "mv" and len(operands) >= 2:
        dest = operands[-1]
        return operands + [posixpath.join(dest, posixpath.basename(s)) for s in operands[:-1]]
    if name in ("rm", "unlink", "truncate"):
        return operands
    if name == "git" and args[:1] in (["checkout"], ["restore"]) and "--" in args:
        return args[args.index("--") + 1 :]
    return []


def _sed_files(args: list[str]) -> list[str]:
    """The files `sed -i` edits: its operands after the script (unless `-e`/`-f` gave the script)."""
    files: list[str] = []
    script_given = False
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("-e", "-f", "--expression", "--file"):
            script_given, skip = True, True
        elif arg.startswith("-") and arg != "-":
            continue
        elif not script_given:
            script_given = True
        else:
            files.append(arg)
    return files


# A read is `cd`s then one pipeline: a reading command, then only line-selecting filters.
_NL_VALUE_FLAGS = frozenset({"-b", "-d", "-f", "-h", "-i", "-l", "-n", "-s", "-v", "-w"})
_SED_RANGE = re.compile(r"\s*(\d+)\s*(?:,\s*(\d+|\$|\+\d+)\s*)?p\s*(?:;\s*\d+\s*q\s*)?;?\s*")
_Lines = tuple[int, int | None]


def _read(parsed: list[tuple[str, _Pipeline]], cwd: str | None, root: str | None) -> FileRead | None:
    walked = list(_walk_cwd(parsed, cwd))
    *prefix, (here, known, pipeline) = walked
    for (sep, _), (_, _, cd) in zip(parsed[1:], prefix):
        if sep not in ("&&", ";") or len(cd) != 1 or cd[0].words[:1] != ["cd"] or cd[0].stdout_to:
            return None
    if len(parsed) > 1 and parsed[-1][0] not in ("&&", ";"):
        return None
    if not pipeline or any(s.stdout_to for s in pipeline) or any(s.stdin_from for s in pipeline[1:]):
        return None
    first = _read_command(pipeline[0])
    if first is None:
        return None
    operand, lines = first
    for stage in pipeline[1:]:
        kept = _filter(stage.words, lines)
        if kept is None:
            return None
        lines = kept
    path = _resolve(operand, here, known, root)
    if path is None or not _plain_operand(operand):
        return None
    return FileRead(path, lines[0], lines[1])


def _read_command(simple: _Simple) -> tuple[str, _Lines] | None:
    """(file operand, lines) for `cat`/`nl`/`head`/`tail`/`sed -n` reading one file."""
    words = simple.words
    if not words:
        return None
    name = posixpath.basename(words[0])
    if name not in _SHELL_READ_COMMANDS and name != "sed":
        return None
    parsed = _filter_args(name, words[1:])
    if parsed is None:
        return None
    lines, operands = parsed
    if simple.stdin_from is not None:
        if operands or simple.stdin_from.startswith("<<"):
            return None
        operands = [simple.stdin_from]
    if len(operands) != 1 or operands[0] == "-":
        return None
    return operands[0], lines


def _filter(words: list[str], lines: _Lines) -> _Lines | None:
    """The lines a filter stage (`head`, `tail`, `sed -n`, `cat -n`, `nl`) keeps of `lines`."""
    if not words:
        return None
    name = posixpath.basename(words[0])
    parsed = _filter_args(name, words[1:])
    if parsed is None or parsed[1]:
        return None
    keep = parsed[0]
    start, end = lines
    if name in ("cat", "nl"):
        return lines
    if start < 0:
        if name == "tail" and keep[0] < 0:
            return max(start, keep[0]), None
        return None
    if keep[0] > 0:
        # Lines counted within the stream: shift them to the file's numbering.
        new_start = start + keep[0] - 1
        new_end = None if keep[1] is None else start + keep[1] - 1
        if end is not None:
            new_end = end if new_end is None else min(new_end, end)
        return None if new_end is not None and new_end < new_start else (new_start, new_end)
    # `tail -n N` of a stream
    if end is not None:
        return max(start, end + keep[0] + 1), end
    return (keep[0], None) if start == 1 else None


def _filter_args(name: str, args: list[str]) -> tuple[_Lines, list[str]] | None:
    """The lines a reading command selects, and its file operands."""
    operands: list[str] = []
    if name == "cat":
        for arg in args:
            if arg.startswith("-") and arg != "-":
                if arg in ("--help", "--version"):
                    return None
            else:
                operands.append(arg)
        return (1, None), operands
    if name == "nl":
        skip = False
        for arg in args:
            if skip:
                skip = False
            elif arg in _NL_VALUE_FLAGS:
                skip = True
            elif arg.startswith("-") and arg != "-":
                continue
            else:
                operands.append(arg)
        return None if skip else ((1, None), operands)
    if name in ("head", "tail"):
        count: str | None = None
        expect = False
        for arg in args:
            if expect:
                count, expect = arg, False
            elif arg in ("-n", "--lines"):
                expect = True
            elif arg.startswith("--lines="):
                count = arg.split("=", 1)[1]
            elif re.fullmatch(r"-n[+-]?\d+", arg):
                count = arg[2:]
            elif re.fullmatch(r"-\d+", arg):
                count = arg[1:]
            elif arg in ("-q", "--quiet", "--silent", "-v", "--verbose"):
                continue
            elif arg.startswith("-") and arg != "-":
                return None  # -c (bytes), -f (follow), ...
            else:
                operands.append(arg)
        if expect:
            return None
        text = "10" if count is None else count
        if name == "head":
            value = _int(text)
            return None if value is None or value <= 0 else ((1, value), operands)
        if text.startswith("+"):
            value = _int(text[1:])
            return None if value is None else ((max(value, 1), None), operands)
        value = _int(text.lstrip("-"))
        return None if value is None or value <= 0 else ((-value, None), operands)
    if name == "sed":
        quiet = False
        scripts: list[str] = []
        expect = False
        for arg in args:
            if expect:
                scripts.append(arg)
                expect = False
            elif arg in ("-n", "--quiet", "--silent"):
                quiet = True
            elif arg in ("-e", "--expression"):
                expect = True
            elif arg.startswith("-") and arg != "-":
                return None  # -i (in place), -E, -f, ...
            elif not scripts:
                scripts.append(arg)
            else:
                operands.append(arg)
        if not quiet or len(scripts) != 1:
            return None
        match = _SED_RANGE.fullmatch(scripts[0])
        if match is None:
            return None
        first = int(match.group(1))
        last_text = match.group(2)
        if first < 1:
            return None
        if last_text is None:
            return (first, first), operands
        if last_text == "$":
            return (first, None), operands
        if last_text.startswith("+"):
            return (first, first + int(last_text[1:])), operands
        last = int(last_text)
        return ((first, last) if last >= first else (first, first)), operands
    return None
