"""Channel versions as LangGraph sees them and as the saver stores them.

LangGraph orders channel versions by comparing them (`>` on strings), so every version a graph
compares must have one width. The official savers and LangGraph's Agent Server (whose checkpointer
adapter makes every version itself, whatever the saver's `get_next_version`) write 32-digit
counters; historykit stores 12-digit ones, which are shorter (a dozen of them are stored with
every checkpoint). A 12-digit version compares greater than every 32-digit one below 10^20, so a
thread started with historykit and continued by the server would look finished to the graph.

The saver therefore hands LangGraph the 32-digit form of its own versions (`loaded_version`) and takes it
back to the 12-digit form when storing (`stored_version`). Only versions of historykit's own shape are
rewritten (a counter and 8 hexadecimal digits); any other version, the server's included, is
stored and returned as given, so the mapping is exact both ways.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["loaded_checkpoint", "loaded_version", "new_version", "stored_checkpoint", "stored_version"]

_SHORT_DIGITS = 12
_LONG_DIGITS = 32
_SUFFIX = 8
_PAD = "0" * (_LONG_DIGITS - _SHORT_DIGITS)
_HEX = frozenset("0123456789abcdef")
_SHORT_LENGTH = _SHORT_DIGITS + 1 + _SUFFIX
_LONG_LENGTH = _LONG_DIGITS + 1 + _SUFFIX


def new_version(counter: int, suffix: int) -> str:
    """The version LangGraph is given: the official savers' 32-digit width, and historykit's suffix."""
    return f"{counter:0{_LONG_DIGITS}}.{suffix:0{_SUFFIX}x}"


def _ours(counter: str, suffix: str) -> bool:
    return counter.isdigit() and counter.isascii() and _HEX.issuperset(suffix)


def stored_version(version: Any) -> str:
    """The form a version is stored in: historykit's 32-digit versions shortened to 12 digits."""
    text = str(version)
    if len(text) == _LONG_LENGTH and text.startswith(_PAD) and text[_LONG_DIGITS] == ".":
        short = text[len(_PAD) :]
        if _ours(short[:_SHORT_DIGITS], short[_SHORT_DIGITS + 1 :]):
            return short
    return text


def loaded_version(version: str) -> str:
    """The form LangGraph is given a stored version in (the inverse of `stored_version`)."""
    if (
        len(version) == _SHORT_LENGTH
        and version[_SHORT_DIGITS] == "."
        and _ours(version[:_SHORT_DIGITS], version[_SHORT_DIGITS + 1 :])
    ):
        return _PAD + version
    return version


_MEMO_SIZE = 65_536
_stored_memo: dict[str, str] = {}
_loaded_memo: dict[str, str] = {}


def _memoized(convert: Any, memo: dict[str, str]) -> Any:
    """`convert` remembered: a checkpoint repeats the versions of the channels it did not change,
    and of every channel in `versions_seen`, so most conversions were made before."""

    def convert_once(version: str) -> str:
        found = memo.get(version)
        if found is None:
            if len(memo) >= _MEMO_SIZE:
                memo.clear()
            found = memo[version] = convert(version)
        return found

    return convert_once


def _map(versions: Mapping[str, Any], convert: Any) -> dict[str, Any]:
    return {channel: convert(v) if isinstance(v, str) else v for channel, v in versions.items()}


_stored_fast = _memoized(stored_version, _stored_memo)
_loaded_fast = _memoized(loaded_version, _loaded_memo)


def stored_checkpoint(checkpoint: Mapping[str, Any]) -> dict[str, Any]:
    """A checkpoint's body with its `channel_versions` and `versions_seen` in the stored form."""
    return _convert_checkpoint(checkpoint, _stored_fast)


def loaded_checkpoint(checkpoint: dict[str, Any]) -> dict[str, Any]:
    """A stored checkpoint's body with its versions in the form LangGraph is given."""
    return _convert_checkpoint(checkpoint, _loaded_fast)


def _convert_checkpoint(checkpoint: Mapping[str, Any], convert: Any) -> dict[str, Any]:
    out = dict(checkpoint)
    versions = out.get("channel_versions")
    if isinstance(versions, Mapping):
        out["channel_versions"] = _map(versions, convert)
    seen = out.get("versions_seen")
    if isinstance(seen, Mapping):
        out["versions_seen"] = {
            node: _map(by_channel, convert) if isinstance(by_channel, Mapping) else by_channel
            for node, by_channel in seen.items()
        }
    return out
