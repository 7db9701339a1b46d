"""`historykit analyze` on the largest corpus session, end to end, as a user runs it.

Each run is the installed `historykit` command in a new process (Python start-up and imports
included), on the corpus session with the most bytes, at the window sizes of `--windows`: the
terminal report, then `--json`, then `--plot` (matplotlib). Target: under 2 seconds.

Run: `.venv/bin/python benchmarks/bench_cli.py` (or `make bench-cli`); `--repeat N` runs per cell
(default 5; the median and the fastest are printed).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from replay import CORPUS

TARGET_SECONDS = 2.0


def historykit_command() -> list[str]:
    """The console script beside this interpreter (the venv's), else `python -m historykit.cli`."""
    script = Path(sys.executable).with_name("historykit")
    return [str(script)] if script.exists() else [sys.executable, "-m", "historykit.cli"]


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "COLUMNS": "120"})
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--windows", type=int, nargs="+", default=[32_000, 128_000])
    args = parser.parse_args()
    largest = max(CORPUS.glob("*.jsonl"), key=lambda p: p.stat().st_size)
    command = historykit_command()
    size = largest.stat().st_size / 1e6
    print(f"{largest.name} ({size:.1f} MB); {' '.join(command)}; {args.repeat} runs each")
    print(f"{'run':44} {'median s':>9} {'fastest s':>10}  target < {TARGET_SECONDS:.0f} s")
    with tempfile.TemporaryDirectory() as tmp:
        for window in args.windows:
            variants = {
                f"analyze --window {window}": [],
                f"analyze --window {window} --json": ["--json"],
                f"analyze --window {window} --plot out.png": ["--plot", str(Path(tmp) / "out.png")],
            }
            for label, extra in variants.items():
                argv = [*command, "analyze", str(largest), "--window", str(window), *extra]
                times = [timed(argv) for _ in range(args.repeat)]
                median = statistics.median(times)
                verdict = "met" if median < TARGET_SECONDS else "MISSED"
                print(f"{label:44} {median:>9.2f} {min(times):>10.2f}  {verdict}")


if __name__ == "__main__":
    main()
