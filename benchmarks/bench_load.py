"""Load: many concurrent conversations through a real LangGraph graph, historykit against the official savers.

PostgreSQL: one process, `--conversations` (100) conversations stepping concurrently on one event loop
(`graph.ainvoke`, a connection pool of `--pool` connections; with `--postgres-processes N`, N client
processes share the conversations and the pool, each on its own event loop, starting together),
each `--steps` (200) agent steps of the checkpointer benchmark's workload (a tool call and a 2-8 KB
tool result a step, `checkpointer_workload.py`).
historykit's `SQLModelSaver` and `AsyncPostgresSaver` run one after the other in the same run, each on a
database of its own that is dropped afterwards.

SQLite: `--sqlite-processes` (8) processes on one SQLite file, sharing the same conversations; each
process steps its conversations in turn with `graph.invoke`. historykit's `SQLModelSaver` and
`SqliteSaver`, each on a file of its own, removed afterwards.

Measured per saver: throughput (steps per second, all conversations together), p50/p99 latency of a
step (one `invoke`, as the caller waits for it under the load), database size, errors; afterwards a new
saver instance reads every conversation back and checks it is complete (every user message, tool call
and tool result of every step that returned, in order; for historykit also its `transcript`).

The official savers store the whole message list again at every step, so their steps get slower as
the conversations grow: each saver's run stops starting new steps after `--cap` seconds ("capped").
Then its figures cover the steps it did, and the ratios are also given at equal progress: the time
historykit took to bring every conversation to the step count the capped saver reached in all of them.

Usage: python benchmarks/bench_load.py [--quick] [--only postgres|sqlite] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from checkpointer_workload import WORKLOAD, build_graph

ADMIN_URL = os.environ.get("HISTORYKIT_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
HISTORYKIT = "historykit"
OFFICIAL = "official"


@dataclass
class LoadResult:
    """One saver's run: what it did, how fast, what it stored, and whether all of it reads back."""

    saver: str
    backend: str
    conversations: int
    steps: int
    """Steps each conversation was to take."""
    done: list[int] = field(default_factory=list)
    """Steps each conversation completed."""
    started_at: list[list[float]] = field(default_factory=list)
    """Per conversation, the seconds from the start at which each of its steps began."""
    finished_at: list[list[float]] = field(default_factory=list)
    """Per conversation, the seconds from the start at which each of its steps returned."""
    latencies: list[float] = field(default_factory=list)
    elapsed: float = 0.0
    cpu_seconds: float = 0.0
    """CPU time of the benchmark's own process(es) while stepping: LangGraph, the saver's client side,
    the driver; not the database server's."""
    errors: list[str] = field(default_factory=list)
    capped: bool = False
    database_bytes: int | None = None
    incomplete: list[str] = field(default_factory=list)
    """Conversations that did not read back complete, with what was wrong."""

    @property
    def total_steps(self) -> int:
        return sum(self.done)

    def throughput(self, upto: int | None = None) -> float:
        """Steps per second; with `upto`, for the first `upto` steps of every conversation."""
        if upto is None:
            return self.total_steps / self.elapsed if self.elapsed else 0.0
        if upto == 0 or any(len(times) < upto for times in self.finished_at):
            return 0.0
        return upto * self.conversations / max(times[upto - 1] for times in self.finished_at)

    def latency(self, q: float, upto: int | None = None) -> float:
        values = self.latencies if upto is None else self.step_latencies(upto)
        if not values:
            return float("nan")  # no step completed: reported as such, not a crash
        if len(values) == 1:
            return values[0]
        return statistics.quantiles(values, n=1000, method="inclusive")[round(q * 1000) - 1]

    def step_latencies(self, upto: int) -> list[float]:
        """The latencies of the first `upto` steps of every conversation."""
        out = []
        for ends, starts in zip(self.finished_at, self.started_at):
            out += [end - start for end, start in zip(ends[:upto], starts[:upto])]
        return out

    @property
    def common_steps(self) -> int:
        """Steps every conversation completed."""
        return min(self.done) if self.done else 0


def expected_problem(messages: Sequence[Any], steps: int, what: str) -> str | None:
    """Why `messages` is not the complete conversation of `steps` steps (None when it is)."""
    expected: list[tuple[str, str]] = []
    for step in range(steps):
        user = WORKLOAD.user_message(step)
        if user is not None:
            expected.append(("human", str(user.content)))
        expected.append(("ai", f"call-{step}"))
        expected.append(("tool", f"call-{step}:{WORKLOAD.file_text(WORKLOAD.path(step))}"))
    got: list[tuple[str, str]] = []
    for message in messages:
        if message.type == "ai":
            calls = message.tool_calls
            got.append(("ai", calls[0]["id"] if calls else ""))
        elif message.type == "tool":
            got.append(("tool", f"{message.tool_call_id}:{message.content}"))
        else:
            got.append((message.type, str(message.content)))
    if len(got) != len(expected):
        return f"{what}: {len(got)} messages, expected {len(expected)}"
    for i, (a, b) in enumerate(zip(got, expected)):
        if a != b:
            return f"{what}: message {i} is {a[0]} {a[1][:40]!r}, expected {b[0]} {b[1][:40]!r}"
    return None


# -- PostgreSQL ----------------------------------------------------------------------------------


@contextmanager
def postgres_database() -> Iterator[str]:
    """A new database on the server (its libpq URL), dropped afterwards."""
    import psycopg

    name = f"historykit_load_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = ADMIN_URL.rpartition("/")
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _sqlalchemy_url(url: str) -> str:
    return "postgresql+psycopg://" + url.split("://", 1)[1]


@asynccontextmanager
async def open_postgres(kind: str, url: str, pool: int, conversations: int) -> AsyncIterator[Any]:
    """The saver as a deployment would open it: set up, on a pool of `pool` connections."""
    if kind == HISTORYKIT:
        from historykit.checkpointers import SQLModelSaver

        # Remember the messages of every live conversation (the default, 32, is for fewer threads).
        saver = SQLModelSaver(
            _sqlalchemy_url(url),
            cached_threads=conversations,
            engine_kwargs={"pool_size": pool, "max_overflow": 0},
        )
        await saver.asetup()
        try:
            yield saver
        finally:
            await saver.aclose()
            saver.close()
    else:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from psycopg.rows import dict_row
        from psycopg_pool import AsyncConnectionPool

        kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
        async with AsyncConnectionPool(
            url, min_size=pool, max_size=pool, kwargs=kwargs, open=False
        ) as connections:
            official = AsyncPostgresSaver(connections)  # type: ignore[arg-type]
            await official.setup()
            yield official


async def drive(
    result: LoadResult,
    graphs: list[Any],
    cap: float,
    *,
    names: Sequence[str] | None = None,
    origin: float | None = None,
) -> None:
    """Step every conversation concurrently until done or `cap` seconds have passed (since
    `origin`, a `time.time()`, when processes share one start; else since now). `names`: the
    conversations' thread ids (`load-<i>`)."""
    start = time.perf_counter() - (0.0 if origin is None else time.time() - origin)
    result.finished_at = [[] for _ in graphs]
    result.started_at = [[] for _ in graphs]
    result.done = [0] * len(graphs)
    threads = names or [f"load-{i}" for i in range(len(graphs))]

    async def conversation(i: int, graph: Any) -> None:
        config = {"configurable": {"thread_id": threads[i]}}
        for step in range(result.steps):
            began = time.perf_counter()
            if began - start > cap:
                result.capped = True
                return
            try:
                await graph.ainvoke(WORKLOAD.graph_input(step), config)
            except Exception as exc:  # counted and reported: an error is a result of the benchmark
                result.errors.append(f"{threads[i]} step {step}: {type(exc).__name__}: {exc}"[:300])
                return
            ended = time.perf_counter()
            result.latencies.append(ended - began)
            result.started_at[i].append(began - start)
            result.finished_at[i].append(ended - start)
            result.done[i] = step + 1

    cpu = time.process_time()
    await asyncio.gather(*(conversation(i, graph) for i, graph in enumerate(graphs)))
    result.elapsed = time.perf_counter() - start
    result.cpu_seconds = time.process_time() - cpu


def postgres_size(url: str) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
        assert row is not None
        return int(row[0])


async def verify(kind: str, saver: Any, result: LoadResult) -> None:
    """Read every conversation back through `saver` (a new instance) and record what is missing."""
    for i, steps in enumerate(result.done):
        thread = f"load-{i}"
        state = await saver.aget_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
        messages = [] if state is None else state.checkpoint["channel_values"].get("messages", [])
        problem = expected_problem(messages, steps, f"{thread} state")
        if problem is None and kind == HISTORYKIT:
            # A conversation that completed no step has no thread, and no transcript.
            transcript = await saver.atranscript(thread)
            logged = [] if transcript is None else transcript.messages
            problem = expected_problem(logged, steps, f"{thread} transcript")
        if problem:
            result.incomplete.append(problem)


async def run_postgres(
    kind: str, conversations: int, steps: int, pool: int, cap: float, processes: int = 1
) -> LoadResult:
    result = LoadResult(kind, "postgres", conversations, steps)
    with postgres_database() as url:
        baseline = postgres_size(url)
        if processes == 1:
            async with open_postgres(kind, url, pool, conversations) as saver:
                graphs = [build_graph(saver, "plain") for _ in range(conversations)]
                await drive(result, graphs, cap)
        else:
            # The schema is made once before the processes start, as a deployment migrates once:
            # `AsyncPostgresSaver.setup()` run by four processes at once can fail on PostgreSQL's
            # catalog ("duplicate key value violates unique constraint pg_type_typname_nsp_index").
            async with open_postgres(kind, url, 2, conversations):
                pass
            shares = [list(range(p, conversations, processes)) for p in range(processes)]
            start_at = time.time() + 15  # time for every process to import LangGraph and build its graphs
            jobs = [(kind, url, share, steps, max(pool // processes, 2), cap, start_at) for share in shares]
            with multiprocessing.get_context("spawn").Pool(processes) as workers:
                merge(result, workers.map(_postgres_worker_entry, jobs))
        result.database_bytes = postgres_size(url) - baseline
        async with open_postgres(kind, url, 2, conversations) as fresh:
            await verify(kind, fresh, result)
    return result


def postgres_worker(
    kind: str, url: str, threads: list[int], steps: int, pool: int, cap: float, start_at: float
) -> dict[str, Any]:
    """One of several client processes: its share of the conversations, concurrently on its own
    event loop and saver (a pool of `pool` connections), from the same moment as the others."""

    async def run() -> dict[str, Any]:
        share = LoadResult(kind, "postgres", len(threads), steps)
        async with open_postgres(kind, url, pool, len(threads)) as saver:
            graphs = [build_graph(saver, "plain") for _ in threads]
            await asyncio.sleep(max(start_at - time.time(), 0.0))
            await drive(share, graphs, cap, names=[f"load-{i}" for i in threads], origin=start_at)
        return {
            "done": dict(zip(threads, share.done, strict=True)),
            "starts": dict(zip(threads, share.started_at, strict=True)),
            "finished": dict(zip(threads, share.finished_at, strict=True)),
            "errors": share.errors,
            "capped": share.capped,
            "cpu": share.cpu_seconds,
        }

    return asyncio.run(run())


def _postgres_worker_entry(args: tuple[Any, ...]) -> dict[str, Any]:
    WORKLOAD.prepare(args[3])
    return postgres_worker(*args)


def merge(result: LoadResult, outs: Sequence[dict[str, Any]]) -> None:
    """The conversations' figures from the processes that stepped them, as one run's."""
    result.finished_at = [[] for _ in range(result.conversations)]
    result.started_at = [[] for _ in range(result.conversations)]
    result.done = [0] * result.conversations
    for out in outs:
        for key, times in out["finished"].items():
            i = int(key)
            result.finished_at[i] = times
            result.started_at[i] = out["starts"][key]
            result.done[i] = out["done"][key]
            result.latencies += [t - s for t, s in zip(times, out["starts"][key], strict=True)]
        result.errors += out["errors"]
        result.cpu_seconds += out["cpu"]
        result.capped = result.capped or out["capped"]
    result.elapsed = max((t[-1] for t in result.finished_at if t), default=0.0)


# -- SQLite, several processes ------------------------------------------------------------------


def sqlite_worker(
    kind: str, path: str, threads: list[int], steps: int, cap: float, start_at: float
) -> dict[str, Any]:
    """One process: step its conversations in turn (`graph.invoke`) until done or capped."""
    if kind == HISTORYKIT:
        from historykit.checkpointers import SQLModelSaver

        saver: Any = SQLModelSaver(f"sqlite:///{path}", cached_threads=max(len(threads), 1))
    else:
        import sqlite3

        from langgraph.checkpoint.sqlite import SqliteSaver

        # The default 5 s busy timeout; SqliteSaver sets WAL itself in setup().
        saver = SqliteSaver(sqlite3.connect(path, check_same_thread=False))
    saver.setup()
    graphs = {i: build_graph(saver, "plain") for i in threads}
    while time.time() < start_at:  # every process starts stepping at the same moment
        time.sleep(0.005)
    origin = time.perf_counter() - (time.time() - start_at)
    out: dict[str, Any] = {"done": {i: 0 for i in threads}, "starts": {i: [] for i in threads}}
    out["finished"] = {i: [] for i in threads}
    out["errors"], out["capped"] = [], False
    live = list(threads)
    cpu = time.process_time()
    for step in range(steps):
        for i in list(live):
            began = time.perf_counter()
            if began - origin > cap:
                out["capped"] = True
                live = []
                break
            try:
                graphs[i].invoke(WORKLOAD.graph_input(step), {"configurable": {"thread_id": f"load-{i}"}})
            except Exception as exc:  # counted and reported
                out["errors"].append(f"load-{i} step {step}: {type(exc).__name__}: {exc}"[:300])
                live.remove(i)
                continue
            ended = time.perf_counter()
            out["starts"][i].append(began - origin)
            out["finished"][i].append(ended - origin)
            out["done"][i] = step + 1
        if not live:
            break
    out["cpu"] = time.process_time() - cpu
    if kind == HISTORYKIT:
        saver.close()
    else:
        saver.conn.close()
    return out


def _sqlite_worker_entry(args: tuple[Any, ...]) -> dict[str, Any]:
    WORKLOAD.prepare(args[3])
    return sqlite_worker(*args)


def run_sqlite(kind: str, conversations: int, steps: int, processes: int, cap: float) -> LoadResult:
    result = LoadResult(kind, "sqlite", conversations, steps)
    directory = Path(tempfile.mkdtemp(prefix="historykit-load-"))
    path = str(directory / "load.db")
    try:
        shares = [list(range(p, conversations, processes)) for p in range(processes)]
        context = multiprocessing.get_context("spawn")
        with context.Pool(processes) as pool:
            start_at = time.time() + 15  # time for every process to import LangGraph and build its graphs
            outs = pool.map(
                _sqlite_worker_entry, [(kind, path, share, steps, cap, start_at) for share in shares]
            )
        merge(result, outs)
        result.database_bytes = sum(p.stat().st_size for p in directory.iterdir())
        asyncio.run(verify_sqlite(kind, path, result))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return result


async def verify_sqlite(kind: str, path: str, result: LoadResult) -> None:
    if kind == HISTORYKIT:
        from historykit.checkpointers import SQLModelSaver

        saver = SQLModelSaver(f"sqlite:///{path}")
        try:
            await verify(kind, saver, result)
        finally:
            await saver.aclose()
            saver.close()
    else:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(path) as official:
            await verify(kind, official, result)


# -- report ----------------------------------------------------------------------------------------


def _mb(n: int | None) -> str:
    return "-" if n is None else f"{n / 1e6:,.1f} MB"


def describe(result: LoadResult, name: str) -> str:
    steps = f"{result.total_steps:,} of {result.conversations * result.steps:,} steps"
    if result.capped:
        steps += (
            f" (capped after {result.elapsed:.0f} s; every conversation reached step {result.common_steps})"
        )
    return (
        f"{name:<24} {steps}\n"
        f"{'':<24} {result.throughput():8.1f} steps/s   p50 {result.latency(0.5) * 1e3:7.1f} ms   "
        f"p99 {result.latency(0.99) * 1e3:7.1f} ms   DB {_mb(result.database_bytes)}   "
        f"errors {len(result.errors)}   incomplete conversations {len(result.incomplete)}\n"
        f"{'':<24} client CPU {result.cpu_seconds / max(result.total_steps, 1) * 1e3:.1f} ms a step "
        f"({result.cpu_seconds:.0f} s)"
    )


def compare(ours: LoadResult, theirs: LoadResult, label: str) -> list[str]:
    lines = [f"{label}: historykit / official"]
    ratio = ours.throughput() / theirs.throughput() if theirs.throughput() else float("inf")
    lines.append(
        f"  whole runs: throughput {ratio:.1f}x, p99 {ours.latency(0.99) * 1e3:.1f} vs "
        f"{theirs.latency(0.99) * 1e3:.1f} ms"
        + (" (official capped: its run covers only the early, cheaper steps)" if theirs.capped else "")
    )
    cpu_ours = ours.cpu_seconds / max(ours.total_steps, 1) * 1e3
    cpu_theirs = theirs.cpu_seconds / max(theirs.total_steps, 1) * 1e3
    if cpu_theirs:
        met = cpu_ours <= 0.5 * cpu_theirs and ours.latency(0.99) <= theirs.latency(0.99) and not ours.errors
        lines.append(
            f"  client CPU a step {cpu_ours:.1f} vs {cpu_theirs:.1f} ms = {cpu_ours / cpu_theirs:.2f}x "
            f"(target <= 0.5x, p99 <= the official's, 0 errors: {'PASS' if met else 'MISS'})"
        )
    k = min(ours.common_steps, theirs.common_steps)
    if k and (theirs.capped or ours.capped):
        ours_k, theirs_k = ours.throughput(k), theirs.throughput(k)
        lines.append(
            f"  at equal progress (every conversation at step {k}): throughput {ours_k:.1f} vs "
            f"{theirs_k:.1f} steps/s = {ours_k / theirs_k:.1f}x, p50 {ours.latency(0.5, k) * 1e3:.1f} vs "
            f"{theirs.latency(0.5, k) * 1e3:.1f} ms, p99 {ours.latency(0.99, k) * 1e3:.1f} vs "
            f"{theirs.latency(0.99, k) * 1e3:.1f} ms"
        )
    if ours.database_bytes and theirs.database_bytes:
        per_ours = ours.database_bytes / max(ours.total_steps, 1)
        per_theirs = theirs.database_bytes / max(theirs.total_steps, 1)
        lines.append(
            f"  database per step stored: {per_ours / 1e3:.1f} vs {per_theirs / 1e3:.1f} KB "
            f"({per_theirs / per_ours:.1f}x smaller)"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=100)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--pool", type=int, default=20, help="PostgreSQL connections per saver")
    parser.add_argument("--cap", type=float, default=600.0, help="seconds after which a saver starts no step")
    parser.add_argument("--sqlite-processes", type=int, default=8)
    parser.add_argument(
        "--postgres-processes",
        type=int,
        default=1,
        help="client processes sharing the PostgreSQL conversations (default 1: one event loop)",
    )
    parser.add_argument("--only", choices=["postgres", "sqlite"])
    parser.add_argument("--quick", action="store_true", help="16 conversations x 20 steps, 60 s caps")
    parser.add_argument("--json", type=Path, help="write the raw results here")
    options = parser.parse_args(argv)
    if options.quick:
        options.conversations, options.steps, options.cap = 16, 20, 60.0
    WORKLOAD.prepare(options.steps)
    results: dict[str, LoadResult] = {}
    if options.only in (None, "postgres"):
        for kind in (HISTORYKIT, OFFICIAL):
            print(
                f"PostgreSQL, {kind}: {options.conversations} conversations x {options.steps} steps ...",
                flush=True,
            )
            results[f"postgres-{kind}"] = asyncio.run(
                run_postgres(
                    kind,
                    options.conversations,
                    options.steps,
                    options.pool,
                    options.cap,
                    options.postgres_processes,
                )
            )
    if options.only in (None, "sqlite"):
        for kind in (HISTORYKIT, OFFICIAL):
            print(f"SQLite, {kind}: {options.sqlite_processes} processes ...", flush=True)
            results[f"sqlite-{kind}"] = run_sqlite(
                kind, options.conversations, options.steps, options.sqlite_processes, options.cap
            )

    names = {
        "postgres-historykit": "SQLModelSaver, PostgreSQL",
        "postgres-official": "AsyncPostgresSaver",
        "sqlite-historykit": "SQLModelSaver, SQLite",
        "sqlite-official": "SqliteSaver",
    }
    print()
    for key, result in results.items():
        print(describe(result, names[key]))
        for line in result.errors[:3] + result.incomplete[:3]:
            print(f"{'':<24}   {line}")
    print()
    for backend in ("postgres", "sqlite"):
        if f"{backend}-historykit" in results and f"{backend}-official" in results:
            processes = options.postgres_processes
            label = (
                f"PostgreSQL, async, {'one process' if processes == 1 else f'{processes} processes'}"
                if backend == "postgres"
                else (f"SQLite, {options.sqlite_processes} processes on one file")
            )
            print("\n".join(compare(results[f"{backend}-historykit"], results[f"{backend}-official"], label)))
    if options.json:
        options.json.parent.mkdir(parents=True, exist_ok=True)
        options.json.write_text(json.dumps({k: asdict(v) for k, v in results.items()}, indent=1))


if __name__ == "__main__":
    main()
