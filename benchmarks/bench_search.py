"""The transcript search tool's latency (`Recall(search=True)`) on the largest corpus session.

Also a generated 1,500-call session (`tests/evaluation/long_sessions.py`). What the tool does for
one call, timed in CPU: `history` is the session as a framework holds it in
view-only mode (neutral messages; the tool converts the framework's messages first, timed apart),
and `store` reads the conversation's transcript from a `SQLModelConversationStore` on a SQLite file
(a new process's first search: nothing cached) and searches it. Queries: a rare value, a common
word, two words, and a word no message has. Median of `--repeat` runs.

Run: `python benchmarks/bench_search.py` (`--repeat 7`).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from replay import load_sessions

from historykit import Recall
from historykit._frameworks import adapter_for
from historykit._transcript_search import find

QUERIES = ("error", "def test", "zzz-no-such-word")


def cpu_ms(run: object, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.process_time()
        run()  # type: ignore[operator]
        times.append((time.process_time() - started) * 1000)
    return statistics.median(times)


async def stored(messages: list, queries: tuple[str, ...], repeat: int) -> dict[str, float]:
    """The search read from a conversation store's transcript, per query."""
    from pydantic_ai.conversation import Conversation

    from historykit.checkpointers import SQLModelConversationStore
    from historykit.plugins.pydantic_ai._adapter import PydanticAIAdapter

    native = PydanticAIAdapter().to_native(messages)
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'chat.db'}"
        store = SQLModelConversationStore(url)
        await store.save(Conversation(conversation_id="big", messages=native))
        out = {}
        for query in queries:
            times = []
            for _ in range(repeat):
                fresh = Recall(store=SQLModelConversationStore(url), search=True)
                started = time.process_time()
                await fresh.afind(query, store_key="big")
                times.append((time.process_time() - started) * 1000)
            out[query] = statistics.median(times)
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    sys.path.insert(1, str(Path(__file__).resolve().parent.parent))  # the generator lives in tests/
    from tests.evaluation.long_sessions import long_session

    sessions = [("the largest corpus session, " + load_sessions()[-1][0], load_sessions()[-1][1])]
    sessions.append(("a generated 1,500-call session", long_session(1, calls=1500)))
    for name, session in sessions:
        report(name, session, args.repeat)


def report(name: str, session: list, repeat: int) -> None:
    chars = sum(
        len(getattr(p, "content", None) or getattr(p, "text", "") or "") for m in session for p in m.parts
    )
    print(f"\n{name}: {len(session):,} messages, {chars:,} characters")
    recall = Recall(search=True)
    rare = next(
        (
            word
            for m in reversed(session)
            for word in m.text.split()
            if len(word) > 12 and word.isidentifier()
        ),
        "TokenCounter",
    )
    queries = (rare, *QUERIES)
    native = None
    try:
        from historykit.plugins.pydantic_ai._adapter import PydanticAIAdapter

        native = PydanticAIAdapter().to_native(session)
    except ImportError:  # pragma: no cover - Pydantic AI is a test dependency
        pass
    if native is not None:
        convert = cpu_ms(lambda: adapter_for(native).to_neutral(native), repeat)
        print(f"converting the framework's history to neutral messages: {convert:.1f} ms")
    print(f"{'query':32} {'hits':>5} {'history (ms)':>13} {'store (ms)':>11}")
    from_store = asyncio.run(stored(session, queries, repeat)) if native is not None else {}
    for query in queries:
        hits = len(find(session, query))
        ms = cpu_ms(lambda q=query: recall.find(q, history=session), repeat)
        store_ms = from_store.get(query)
        from_file = f"{store_ms:>11.1f}" if store_ms is not None else f"{'-':>11}"
        print(f"{query[:32]:32} {hits:>5} {ms:>13.1f} {from_file}")


if __name__ == "__main__":
    main()
