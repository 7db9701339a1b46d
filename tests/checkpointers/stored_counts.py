"""Helpers of the stored-token-count tests (LangGraph saver and Pydantic AI conversation store):
plant a wrong count in one conversation's rows, and watch which stored counts a counter finds."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from historykit import _tokens as tokens
from historykit.checkpointers._database import create_engine

PLANTED = 999_999
"""The count planted: far above any message of these tests."""


def plant_count(database_url: str, thread_id: str) -> None:
    """Overwrite every token count stored for `thread_id` with `PLANTED` (at least one)."""
    engine = create_engine(database_url)
    try:
        with engine.begin() as conn:
            planted = conn.execute(
                sa.text("UPDATE historykit_token_count SET tokens = :tokens WHERE thread_id = :thread"),
                {"tokens": PLANTED, "thread": thread_id},
            ).rowcount
    finally:
        engine.dispose()
    assert planted >= 1


def spy_loaded_counts(monkeypatch: pytest.MonkeyPatch) -> list[tuple[object, int | None]]:
    """Every stored count a `TokenCounter` looks up from now on, as `(native message, count or None)`."""
    found: list[tuple[object, int | None]] = []
    lookup = tokens.loaded_count

    def spying(native: object, method: str, digest: bytes) -> int | None:
        found.append((native, answer := lookup(native, method, digest)))
        return answer

    monkeypatch.setattr(tokens, "loaded_count", spying)
    return found
