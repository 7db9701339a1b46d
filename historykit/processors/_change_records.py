"""What a file change added, in one line: the compact record placeholders and summaries keep of it.

`ClearToolResults` clears the arguments of old write and edit calls, and a summary folds them away;
both keep the path, and with this line they also keep what the change was: the longest line of the
new text the call wrote (`new_string`, `content`, `new_str`, `file_text`, the `+` lines of a patch;
for a shell command, the command), without the lines an edit only repeated for context (those of
its `old_string`), cut to `CHANGE_CHARS` characters. The longest line is the one most likely to say
something of its own (a signature, a condition, a message), not a bracket or a `pass`.

Example:
    ```python
    from historykit import ToolCallPart
    from historykit.processors.change_records import change_line

    call = ToolCallPart("Edit", {"file_path": "a.py", "old_string": "x = 1", "new_string": "x = compute_x()"})
    change_line(call)   # 'x = compute_x()'
    ```
"""

from __future__ import annotations

from historykit._messages import ToolCallPart
from historykit.processors._file_reads import CLEARED_HEAD, CLEARED_TAIL, shell_text

CHANGE_CHARS = 80
"""Characters of the line kept."""
MIN_CHANGE = 8
"""A longest line shorter than this says nothing of its own (`}`, `pass`): no record."""
_CHANGE_KEYS = (
    ("new_string", "old_string"),
    ("new_str", "old_str"),
    ("content", None),
    ("file_text", None),
    ("text", None),
    ("patch", None),
    ("input", None),
)
"""The argument holding what a write or edit call wrote, and the one holding what it replaced."""
NEW_TEXT_KEYS = frozenset(new for new, _ in _CHANGE_KEYS)
"""The arguments holding the new text of a change."""
_RECORD_TAIL = "`" + CLEARED_TAIL


def kept_record(value: str) -> str | None:
    """`value` itself, unless it is a cleared value: then the record its placeholder kept of the
    change (the line it added), or `None` when it kept none. A summary of calls cleared earlier
    lists what the change added, not the placeholder."""
    if not (value.startswith(CLEARED_HEAD) and value.endswith(CLEARED_TAIL)) or "\n" in value:
        return value
    at = value.find(" added `")
    if at < 0 or not value.endswith(_RECORD_TAIL):
        return None
    return value[at + len(" added `") : -len(_RECORD_TAIL)]


def change_text(call: ToolCallPart) -> str:
    """The text a change wrote, without the lines it kept: an edit's `new_string` repeats lines of
    its `old_string` for context, and those are not what changed."""
    args = call.arguments_dict()
    edits = args.get("edits")
    pairs: list[tuple[object, object]] = (
        [(e.get("new_string"), e.get("old_string")) for e in edits if isinstance(e, dict)]
        if isinstance(edits, list)
        else [(args.get(k), args.get(old) if old else None) for k, old in _CHANGE_KEYS]
    )
    news = []
    for new, old in pairs:
        if isinstance(new, str):
            new = kept_record(new)
        if isinstance(old, str):
            old = kept_record(old)
        if isinstance(new, str) and new.strip():
            kept = {ln.strip() for ln in old.splitlines()} if isinstance(old, str) else set()
            added = "\n".join(ln for ln in new.splitlines() if ln.strip() not in kept)
            news.append(_patch_additions(added) if "*** Begin Patch" in added else added)
    if news:
        return "\n".join(news)
    for value in args.values():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str) and (record := kept_record(item)) != item:
                # A script `ClearToolResults` cleared: what it added is the record its placeholder kept.
                return record or ""
    script = shell_text(call)
    if script is not None:
        return _patch_additions(script) if "*** Begin Patch" in script else script
    return call.arguments if isinstance(call.arguments, str) else ""


def _patch_additions(patch: str) -> str:
    return "\n".join(ln[1:] for ln in patch.splitlines() if ln.startswith("+") and not ln.startswith("+++"))


def longest_line(text: str, limit: int = CHANGE_CHARS) -> str | None:
    """The longest line of `text`, stripped and cut to `limit`; `None` when it is under `MIN_CHANGE`."""
    lines = sorted((ln.strip() for ln in text.splitlines()), key=len, reverse=True)
    line = lines[0] if lines else ""
    return line[:limit].rstrip() if len(line) >= MIN_CHANGE else None


def change_line(call: ToolCallPart) -> str | None:
    """The record of what a write or edit `call` added: its longest new line (module docstring)."""
    return longest_line(change_text(call))
