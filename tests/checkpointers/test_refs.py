"""The stored form of a message list: runs of log numbers, encoded compactly and read back exactly."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from historykit.checkpointers._refs import decode_refs, encode_refs, expand_runs, to_runs

# Log numbers start at the current time in µs: large, and mostly consecutive.
_BASE = 1_795_333_101_263_388

sequences = st.lists(st.integers(min_value=0, max_value=5_000), max_size=200).map(
    lambda offsets: [_BASE + offset for offset in offsets]
)


@given(sequences, st.booleans())
def test_any_list_of_numbers_reads_back_exactly(seqs: list[int], snapshot: bool) -> None:
    refs = decode_refs(encode_refs(to_runs(seqs), snapshot=snapshot))
    assert expand_runs(refs.runs) == seqs
    assert refs.snapshot is snapshot


def test_swapped_numbers_cost_a_few_bytes_each_not_the_whole_number_again() -> None:
    # Concurrent writes log a tool result before the call that precedes it: every such swap
    # starts new runs, and a long thread has dozens of them.
    seqs = list(range(_BASE, _BASE + 2_000))
    for i in range(50, 2_000, 60):
        seqs[i], seqs[i + 1] = seqs[i + 1], seqs[i]
    data = encode_refs(to_runs(seqs))
    assert expand_runs(decode_refs(data).runs) == seqs
    assert len(to_runs(seqs)) > 90
    assert len(data) < 8 * len(to_runs(seqs)) + 40, data


def test_blobs_of_the_first_format_still_read() -> None:
    old = json.dumps({"v": 1, "runs": [_BASE, 3, _BASE + 10, 2], "without_id": [4]}).encode()
    refs = decode_refs(old)
    assert expand_runs(refs.runs) == [_BASE, _BASE + 1, _BASE + 2, _BASE + 10, _BASE + 11]
    assert refs.without_id == (4,)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (None, "empty"),
        (b"\x80not json", "not JSON"),
        (b'{"v": 9, "runs": []}', "unknown format"),
        (b'{"v": 2, "runs": [1, 2, 3]}', "not pairs of integers"),
        (b'{"v": 2, "runs": [1, 0]}', "length 0"),
        (b'{"v": 2, "runs": [1, 2], "without_id": [5]}', "without_id"),
    ],
)
def test_a_malformed_blob_is_named(data: bytes | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        decode_refs(data)
