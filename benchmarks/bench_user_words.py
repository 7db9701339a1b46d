"""What the model still sees of the user's words and of the files changed, at the last call.

Each session is replayed model call by model call through `historykit.default_pipeline()` at a
32,000-token window in persistent mode (each call's output carried forward, as an agent's state
is). At the last call, what the model is sent is searched for:

- each of the user's own messages (`user_words`: not tool output, injected instruction files,
  reminders, environment context or earlier summaries): seen whole (its words, whitespace aside),
  seen shortened (only its head: a summary had to shorten it to fit its budget), or missing;
- each file written or edited (`file_accesses`' writes): its path in the text sent, or a tool call
  sent that writes it. Tool output does not count.

Sessions: the corpus sessions with more than one user message, and generated ones
(`tests/processors/user_words_sessions.py`): a long instruction file pasted into the first message
(Codex `AGENTS.md` or Claude Code `CLAUDE.md` style), many short requests, some with reminders,
file reads, edits and writes in every common shape, tests, and an earlier compaction summary
midway. Targets: 100% of the files, at least 95% of the user's messages seen whole (sessions whose
messages fit the summary's budget; the over-budget rows show that shortened messages are not lost).
Each replay is also priced as `bench_replay.py` prices it (`replay.Meter`; summaries as if an LLM
had read their input): `cost`, the share of input `cached`, and the summaries written.

Run: `python benchmarks/bench_user_words.py` (or `make bench-user-words`); `--help` for the options.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from replay import CountingSummarizer, Meter, Result, load_sessions, total

import historykit
from historykit._tokens import TokenCounter
from historykit.processors._summarizers import user_words

sys.path.insert(1, str(Path(__file__).resolve().parent.parent))
from tests.processors.user_words_sessions import (
    SessionShape,
    Visibility,
    build_session,
    last_view,
    visibility,
)


def _row(name: str, v: Visibility, cost: Result, seconds: float) -> str:
    return (
        f"{name:<46} {v.user_messages:>5} {v.seen_whole:>6} {v.seen_shortened:>6} "
        f"{v.user_messages - v.seen_whole - v.seen_shortened:>5} {v.files_changed:>6} {v.files_seen:>6}"
        f" {cost.cost:>11,.0f} {cost.cached_share:>7.1%} {cost.summaries:>5} {seconds:>6.1f}"
    )


Session = list[historykit.Message]


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "n/a"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--window", type=int, default=32_000)
    parser.add_argument("--seeds", type=int, default=4, help="generated sessions per shape")
    parser.add_argument("--requests", type=int, nargs="+", default=[20, 40, 60], help="requests per session")
    parser.add_argument(
        "--over-budget", type=int, default=150, help="requests of the over-budget sessions (0: none)"
    )
    parser.add_argument("--show-missing", action="store_true", help="print what is not seen")
    args = parser.parse_args()
    counter = TokenCounter()
    replay = f"window {args.window:,}; persistent replay of default_pipeline()"
    print(f"tokenizer {counter.tokenizer_name}; {replay}\n")
    widths = {"users": 5, "whole": 6, "short": 6, "lost": 5, "files": 6, "seen": 6, "cost": 11}
    widths |= {"cached": 7, "summ.": 5, "s": 6}
    header = f"{'session':<46} " + " ".join(f"{c:>{w}}" for c, w in widths.items())

    groups: dict[str, list[tuple[str, Session]]] = {"corpus (several user messages)": []}
    for name, session in load_sessions():
        if sum(1 for m in session if user_words(m) is not None) > 1:
            groups["corpus (several user messages)"].append((name, session))
    generated = groups.setdefault("generated", [])
    for requests in args.requests:
        for style in ("claude", "codex"):
            for seed in range(args.seeds):
                shape = SessionShape(requests=requests, style=style)
                generated.append((f"{style}-{requests}req-seed{seed}", build_session(seed, shape)))
    if args.over_budget:
        over = groups.setdefault("generated, over the summary's budget", [])
        for style in ("claude", "codex"):
            shape = SessionShape(requests=args.over_budget, style=style, steps=(1, 2))
            over.append((f"{style}-{args.over_budget}req-seed0", build_session(0, shape)))

    for group, sessions in groups.items():
        print(f"== {group}\n{header}")
        seen = Visibility()
        costs: list[Result] = []
        for name, session in sessions:
            started = time.perf_counter()
            meter = Meter(args.window, counter, check=False)
            summarizer = CountingSummarizer(counter)  # summaries priced as if an LLM read their input
            read = [0, 0]  # summarizer tokens and calls so far

            def price(
                sent: list[historykit.Message],
                t: int,
                meter: Meter = meter,
                session: Session = session,
                summarizer: CountingSummarizer = summarizer,
                read: list[int] = read,
            ) -> None:
                tokens, calls = summarizer.tokens - read[0], summarizer.calls - read[1]
                read[:] = [summarizer.tokens, summarizer.calls]
                meter.add(sent, session[t - 1], raw=session[:t], summarizer_tokens=tokens, summaries=calls)

            pipeline = historykit.default_pipeline(summarizer=summarizer)
            sent = last_view(session, pipeline, args.window, counter, price)
            v = visibility(session, sent)
            seconds = time.perf_counter() - started
            print(_row(name, v, meter.result, seconds))
            if args.show_missing:
                for words in v.missing_messages:
                    print(f"    missing message: {words[:100]!r}")
                for path in v.missing_files:
                    print(f"    missing file: {path}")
            seen += v
            costs.append(meter.result)
        print(_row("total", seen, total(costs), 0.0))
        print(
            f"user messages seen whole {_share(seen.seen_whole, seen.user_messages)}, "
            "seen at least shortened "
            f"{_share(seen.seen_whole + seen.seen_shortened, seen.user_messages)}; "
            f"files written or edited seen {_share(seen.files_seen, seen.files_changed)}\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
