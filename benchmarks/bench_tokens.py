"""Token accounting cost: a cold count, then a second count after one more turn is appended.

For the largest corpus session and a generated 10,000-message history, in each framework
(neutral, Pydantic AI, LangChain): the time of a cold count (empty cache), of a second count of
the history grown by one turn (target: under 5 ms at 10,000 messages), and the peak memory of the
cold count (tracemalloc, measured in a separate pass so it does not slow the timed one).

Run: `.venv/bin/python benchmarks/bench_tokens.py` (or `make bench-tokens`).
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from replay import CORPUS

from historykit._frameworks import Adapter, NeutralAdapter
from historykit._messages import Message, TextPart, ToolCallPart, ToolResultPart
from historykit._tokens import TokenCounter
from historykit.formats import read_chat_jsonl


def generated_history(n_messages: int) -> list[Message]:
    """A file-reading agent loop: user task, then call/result pairs with 1-4 KB results."""
    messages = [Message.system("You are a coding agent."), Message.user("Read the project and fix the bug.")]
    step = 0
    while len(messages) < n_messages:
        call_id = f"call_{step}"
        path = f"src/module_{step % 97}.py"
        messages.append(Message("assistant", (ToolCallPart(call_id, "Read", {"file_path": path}),)))
        body = "\n".join(f"    line {j}: value = compute({j}, {step})" for j in range(30 + (step * 37) % 90))
        messages.append(Message("tool", (ToolResultPart(call_id, "Read", body),)))
        step += 1
    return messages[:n_messages]


def one_more_turn(step: int) -> list[Message]:
    call_id = f"call_extra_{step}"
    return [
        Message(
            "assistant",
            (TextPart("Reading one more file."), ToolCallPart(call_id, "Read", {"file_path": "x.py"})),
        ),
        Message("tool", (ToolResultPart(call_id, "Read", "print('one more')\n" * 40),)),
    ]


def adapters() -> list[Adapter]:
    found: list[Adapter] = [NeutralAdapter()]
    try:
        from historykit.plugins.pydantic_ai import PydanticAIAdapter

        found.append(PydanticAIAdapter())
    except ImportError:
        pass
    try:
        from historykit.plugins.langchain import LangChainAdapter

        found.append(LangChainAdapter())
    except ImportError:
        pass
    return found


def timed(fn: Callable[[], Any], repeat: int = 1) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def measure(native: list[Any], extra: list[Any]) -> dict[str, float]:
    counter = TokenCounter()
    cold = timed(lambda: counter.count(native, use_usage=False))
    grown = native + extra
    second = timed(lambda: counter.count(grown, use_usage=False), repeat=5)
    tracemalloc.start()
    TokenCounter().count(native, use_usage=False)
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return {"cold_ms": cold, "second_ms": second, "peak_mib": peak, "tokens": counter.count(grown).tokens}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000, help="size of the generated history")
    args = parser.parse_args()
    histories: dict[str, list[Message]] = {}
    paths = sorted(CORPUS.glob("*.jsonl"), key=lambda p: p.stat().st_size)
    if paths:
        histories[f"corpus: {paths[-1].stem}"] = read_chat_jsonl(paths[-1])
    histories[f"generated: {args.messages:,} messages"] = generated_history(args.messages)
    print(f"tokenizer: {TokenCounter().tokenizer_name}")
    header = (
        f"{'history':48} {'framework':12} {'native msgs':>11} {'tokens':>10} "
        f"{'cold ms':>9} {'2nd ms':>8} {'peak MiB':>9}"
    )
    print(header)
    print("-" * len(header))
    for name, neutral in histories.items():
        for adapter in adapters():
            native = adapter.to_native(neutral)
            extra = adapter.to_native(one_more_turn(0))
            r = measure(native, extra)
            print(
                f"{name:48} {adapter.framework:12} {len(native):>11,} {int(r['tokens']):>10,} "
                f"{r['cold_ms']:>9.1f} {r['second_ms']:>8.2f} {r['peak_mib']:>9.1f}"
            )


if __name__ == "__main__":
    main()
