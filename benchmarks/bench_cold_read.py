"""Cold `get_state` of a long thread in new processes: historykit's saver against the official ones.

`bench_checkpointers.py` measures one cold read per milestone, after stepping every saver through a
real graph (tens of minutes at 1,000 steps for the official savers). This script measures only the
cold read, and many times: it builds each saver's thread once, then reads it in `--runs` new
processes per saver, interleaved (a reader of each saver in turn, so load changes hit all alike),
and reports the median CPU time of the read and the ratio of each official saver's to historykit's.

- The thread: `--steps` steps of `checkpointer_workload.py`'s workload (1,000 steps: 2,143
  messages), plain `add_messages` state, saved as LangGraph saves a superstep (`put_writes` of the
  step's messages, then `put` of the next checkpoint holding the whole list), each saver in its own
  SQLite file or its own PostgreSQL database (created here, dropped at the end).
- The read: in a new process, a new saver instance on that database; connections and tables made
  ready by reading another thread first; then `get_state` of a compiled graph (the workload's graph)
  on the thread, timed in CPU time (`time.process_time`, steadier than wall time on a loaded
  machine; the PostgreSQL server's own CPU is not in it) and wall time.
- Garbage collection: a process that imported LangGraph holds about 100,000 objects its first full
  collection walks, and that collection lands on whatever allocates enough first, often the cold
  read. `--gc collect` runs `gc.collect()` before the read (as an application can at start-up),
  `--gc none` does not, `--gc both` (default) measures both ways and reports both; each row also
  says how much of the read went to full collections.

Run: `.venv/bin/python benchmarks/bench_cold_read.py` (SQLite and PostgreSQL, 1,000 steps, 7 runs
each way); `--savers historykit-sqlite,sqlite` for SQLite only; `--keep state.json` keeps the built
databases and reuses them on the next run with the same file (`--drop state.json` removes them).
PostgreSQL is the server at `--postgres` (default `postgresql://postgres@127.0.0.1:5432/postgres`,
or `$HISTORYKIT_BENCH_POSTGRES`).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench_checkpointers import (
    DEFAULT_POSTGRES,
    OFFICIAL_OF,
    SAVERS,
    THREAD,
    Job,
    Target,
    full_collections,
    open_saver,
)
from checkpointer_workload import WORKLOAD, DirectSteps

DEFAULT_SAVERS = ("historykit-sqlite", "sqlite", "historykit-pg", "postgres")


def _create(spec_name: str, steps: int, workdir: Path, admin_url: str) -> Job:
    """An empty database for one saver, as a `Job` the reader can open."""
    spec = SAVERS[spec_name]
    job = Job(saver=spec_name, state="plain", mode="graph", steps=[steps], cap=0.0, list_cap=0.0)
    if spec.backend == "sqlite":
        job.sqlite_path = str(Path(tempfile.mkdtemp(prefix="cold-", dir=workdir)) / "checkpoints.db")
    else:
        import psycopg

        name = f"historykit_cold_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        job.postgres_url = f"{admin_url.rpartition('/')[0]}/{name}"
    return job


def _drop(job: Job, admin_url: str) -> None:
    if job.sqlite_path:
        shutil.rmtree(Path(job.sqlite_path).parent, ignore_errors=True)
    elif job.postgres_url:
        import psycopg

        name = job.postgres_url.rpartition("/")[2]
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def _build(job: Job, steps: int) -> float:
    """Save `steps` supersteps of the workload on the job's saver; seconds taken."""
    spec = SAVERS[job.saver]
    WORKLOAD.prepare(steps)
    start = time.perf_counter()
    async with open_saver(spec, job) as saver:
        direct = DirectSteps(saver, "plain", THREAD)
        direct.advance(saver.put(*direct.start()))
        for step in range(steps):
            (config, writes, task_id), (checkpoint, metadata, versions) = direct.step(step)
            saver.put_writes(config, writes, task_id)
            direct.advance(saver.put(direct.config, checkpoint, metadata, versions))
    return time.perf_counter() - start


async def reader_main(job: Job, collect: bool) -> dict[str, Any]:
    """Entry of a reading process: one cold `get_state` on a new saver instance."""
    spec = SAVERS[job.saver]
    async with open_saver(spec, job) as saver:
        target = Target(spec, saver, job.state, "graph")
        other = Target(spec, saver, job.state, "graph")
        other.config = {"configurable": {"thread_id": "warm-up"}}
        await other.get_tuple()
        if collect:
            gc.collect()
        with full_collections() as collections:
            start, start_cpu = time.perf_counter(), time.process_time()
            state = await target.get_state()
            wall = (time.perf_counter() - start) * 1000
            cpu = (time.process_time() - start_cpu) * 1000
        return {
            "cpu_ms": cpu,
            "wall_ms": wall,
            "gc_ms": sum(collections) * 1000,
            "messages": len(state.values.get("messages", [])),
        }


def _read(job: Job, collect: bool) -> dict[str, Any]:
    command = [sys.executable, __file__, "--reader", json.dumps({"job": asdict(job), "collect": collect})]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600)
    for line in proc.stdout.splitlines():
        if line.startswith("READ "):
            return dict(json.loads(line[len("READ ") :]))
    tail = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
    raise RuntimeError(f"{job.saver} reader failed: {tail[:300]}")


def _names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in SAVERS or SAVERS[n].family == "reference"]
    if unknown:
        raise SystemExit(f"unknown saver(s): {', '.join(unknown)}")
    return names


def _report(
    samples: dict[tuple[str, bool], list[dict[str, Any]]], names: list[str], modes: list[bool]
) -> None:
    for collect in modes:
        print(
            f"\ncold get_state, {'after gc.collect()' if collect else 'no collection before the read'}"
            f" (median of {len(next(iter(samples.values())))} new processes)"
        )
        print(f"{'saver':<34} {'messages':>8} {'CPU ms':>8} {'wall ms':>8} {'in gc ms':>9} {'CPU range':>15}")
        cpu: dict[str, float] = {}
        for name in names:
            rows = samples[(name, collect)]
            cpu[name] = statistics.median(r["cpu_ms"] for r in rows)
            low, high = min(r["cpu_ms"] for r in rows), max(r["cpu_ms"] for r in rows)
            print(
                f"{SAVERS[name].label:<34} {rows[0]['messages']:>8} {cpu[name]:>8.1f} "
                f"{statistics.median(r['wall_ms'] for r in rows):>8.1f} "
                f"{statistics.median(r['gc_ms'] for r in rows):>9.1f} {f'{low:.1f}-{high:.1f}':>15}"
            )
        for ours, theirs in OFFICIAL_OF.items():
            if ours in cpu and theirs in cpu:
                print(
                    f"  {SAVERS[ours].label} is {cpu[theirs] / cpu[ours]:.2f}x faster than "
                    f"{SAVERS[theirs].label} (CPU; target >= 2x)"
                )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--savers", default=",".join(DEFAULT_SAVERS), help="savers, comma-separated")
    parser.add_argument("--steps", type=int, default=1000, help="workload steps (default 1,000)")
    parser.add_argument("--runs", type=int, default=7, help="new reading processes per saver and gc mode")
    parser.add_argument("--gc", choices=("both", "collect", "none"), default="both")
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES, help="admin URL of the PostgreSQL server")
    parser.add_argument(
        "--keep", default=None, help="keep the built databases, listed in this file, and reuse them"
    )
    parser.add_argument("--drop", default=None, help="drop the databases a --keep file lists, run nothing")
    parser.add_argument("--reader", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.reader:
        raw = json.loads(args.reader)
        print("READ " + json.dumps(asyncio.run(reader_main(Job(**raw["job"]), raw["collect"]))), flush=True)
        return
    if args.drop:
        for raw_job in json.loads(Path(args.drop).read_text()).values():
            _drop(Job(**raw_job), args.postgres)
        Path(args.drop).unlink()
        return

    names = _names(args.savers)
    workdir = Path(tempfile.gettempdir())
    kept: dict[str, Any] = {}
    if args.keep and Path(args.keep).exists():
        kept = json.loads(Path(args.keep).read_text())
    jobs: dict[str, Job] = {}
    try:
        for name in names:
            key = f"{name}@{args.steps}"
            if key in kept:
                jobs[name] = Job(**kept[key])
                continue
            jobs[name] = _create(name, args.steps, workdir, args.postgres)
            if args.keep:
                kept[key] = asdict(jobs[name])
                Path(args.keep).write_text(json.dumps(kept, indent=1))
            seconds = asyncio.run(_build(jobs[name], args.steps))
            print(f"built {name}: {args.steps} steps in {seconds:.1f} s", file=sys.stderr, flush=True)
        modes = {"both": [True, False], "collect": [True], "none": [False]}[args.gc]
        samples: dict[tuple[str, bool], list[dict[str, Any]]] = {(n, c): [] for n in names for c in modes}
        load = os.getloadavg()[0]
        for run in range(args.runs):
            for collect in modes:
                for name in names:
                    samples[(name, collect)].append(_read(jobs[name], collect))
            print(f"run {run + 1}/{args.runs} done", file=sys.stderr, flush=True)
        print(
            f"{args.steps} steps, plain add_messages; {args.runs} new processes per saver and mode; "
            f"1-minute load average {load:.2f} -> {os.getloadavg()[0]:.2f}"
        )
        _report(samples, names, modes)
    finally:
        if not args.keep:
            for job in jobs.values():
                _drop(job, args.postgres)


if __name__ == "__main__":
    main()
