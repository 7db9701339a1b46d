"""What the compaction hooks cost (`Pipeline(before_compaction=..., after_compaction=...)`).

The bundled sample session (54 model calls) played call by call through `default_pipeline()` at a
20,000-token window (it compacts several times), in persistent and view-only mode, without hooks
and with two hooks that only record their events. CPU time, the best of `--repeat` runs of each;
the ratio is with hooks over without.

Run: `python benchmarks/bench_hooks.py` (`--repeat 5`).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from historykit import Pipeline, default_pipeline
from historykit._messages import Message
from historykit._view import request_points
from historykit.formats import read_transcript
from historykit.testing import CountingSummarizer, sample_path

WINDOW = 20_000


def play(raw: list[Message], mode: str, hooked: bool, events: list[Any]) -> float:
    """CPU seconds to play every model call of `raw` in `mode`."""
    hooks = {"before_compaction": events.append, "after_compaction": events.append} if hooked else {}
    pipeline = Pipeline(default_pipeline(summarizer=CountingSummarizer()).processors, **hooks)
    kept: list[Message] = []
    start = 0
    started = time.process_time()
    for point in request_points(raw):
        given = raw[:point] if mode == "view" else [*kept, *raw[start:point]]
        result = pipeline.run(given, WINDOW, mode=mode, conversation="c")  # type: ignore[arg-type]
        kept, start = result.history, point
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    repeat = parser.parse_args().repeat
    raw = read_transcript(sample_path()).history
    calls = len(request_points(raw))
    for mode in ("persistent", "view"):
        events: list[Any] = []
        off = min(play(raw, mode, False, []) for _ in range(repeat))
        on = min(play(raw, mode, True, events) for _ in range(repeat))
        print(
            f"{mode:10} {calls} calls: {off * 1000:6.1f} ms CPU without hooks, {on * 1000:6.1f} ms with "
            f"(ratio {on / off:.3f}); {len(events) // repeat} hook calls per play"
        )


if __name__ == "__main__":
    main()
