"""LangGraph checkpointers on a long agent run: historykit's `SQLModelSaver` against the official savers.

Savers (`--savers`, comma-separated; default: all):
- `historykit-sqlite`, `historykit-sqlite-async`, `historykit-pg`, `historykit-pg-async`:
  `SQLModelSaver` through its sync or its async API, on a SQLite file or on PostgreSQL;
- `sqlite`, `sqlite-async`, `postgres`, `postgres-async`: LangGraph's `SqliteSaver`,
  `AsyncSqliteSaver`, `PostgresSaver`, `AsyncPostgresSaver`;
- `reference`: LangGraph's `InMemorySaver` holding the objects themselves (no serialization, no
  I/O). Not a real checkpointer: it measures what LangGraph itself costs per step, so the share of
  a step that is the saver's can be read off.

Each saver runs the workload of `checkpointer_workload.py` (a step: an AI tool call and a 2-8 KB
tool result, a user message every 7th step) with plain `add_messages` state and with LangGraph's
`DeltaChannel` (`--states`), through a real compiled graph invoked once per step and through the
direct `put_writes` + `put` calls of one superstep per step (`--modes`). One run per configuration
goes up to the largest `--steps`, and is measured when it passes each of them:

- step cost: mean wall time of the 20 steps ending at step 50, and of the last 50 steps before the
  milestone (`ms/step`), with the process CPU time of those steps (`cpu`; the PostgreSQL server's
  own CPU is not in it);
- database size: the SQLite file plus its WAL after a `wal_checkpoint(TRUNCATE)`; on PostgreSQL,
  the saver's tables in the configuration's own database, with their indexes and TOAST
  (`pg_total_relation_size` of every table outside the system schemas: not `pg_database_size`,
  which also counts the dead catalog rows of the benchmark's own `ANALYZE` runs on a server whose
  autovacuum is off, about a third of the payload at 1,000 steps); and its ratio to the payload
  (`x pay`): the serialized size of the distinct messages;
- `get_state` (graph) / `get_tuple` (direct), median of 5 calls on the running saver (`warm`),
  and the first call in a new process on a new saver (`cold`: nothing cached; the targets say how
  much of it went to full garbage collections, and compare its CPU time, steadier than wall time
  on a loaded machine);
- a full `list` of the thread's checkpoints in that new process (`list`), capped at `--list-cap`
  seconds (shown as `>N`, with the share listed by then);
- peak RSS of the process running the steps (`RSS`), and of the one reading (`rRSS`).

Each configuration runs in its own process, in its own SQLite file or PostgreSQL database (created
and dropped here), and stops stepping after `--cap` seconds of steps ("capped at N steps").
PostgreSQL is the server at `--postgres` (default `postgresql://postgres@127.0.0.1:5432/postgres`,
or `$HISTORYKIT_BENCH_POSTGRES`); without one the PostgreSQL savers are skipped, saying so.

Run: `.venv/bin/python benchmarks/bench_checkpointers.py` (or `make bench-checkpointers`);
`--quick` for a first look (50 and 200 steps, short caps); `--json out.json` keeps the raw numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import gc
import json
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from checkpointer_workload import WORKLOAD, DirectSteps, StateKind, build_graph, payload_bytes
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver

DEFAULT_POSTGRES = os.environ.get(
    "HISTORYKIT_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres"
)
THREAD = "bench"
EARLY_STEP = 50
"""The early window is the 20 steps ending here."""
WINDOW = 50
"""Steps averaged at each milestone."""
READS = 5
"""Warm reads per measurement (the median is kept)."""
READER_MEMORY_LIMIT = 12 * 1024**3
"""Address-space limit of the reading process: an official saver's `list` can load every
checkpoint's message list at once (`PostgresSaver` fetches them all before yielding)."""
ANALYZE_EVERY = 50
"""Steps between two `ANALYZE` runs on a PostgreSQL server whose autovacuum is off."""


@dataclass(frozen=True)
class SaverSpec:
    """One checkpointer under test."""

    name: str
    family: str
    """`historykit`, `official` or `reference`."""
    backend: str
    """`sqlite`, `postgres` or `memory`."""
    asynchronous: bool
    label: str


SAVERS = {
    spec.name: spec
    for spec in (
        SaverSpec("historykit-sqlite", "historykit", "sqlite", False, "SQLModelSaver (SQLite)"),
        SaverSpec("historykit-sqlite-async", "historykit", "sqlite", True, "SQLModelSaver async (SQLite)"),
        SaverSpec("historykit-pg", "historykit", "postgres", False, "SQLModelSaver (PostgreSQL)"),
        SaverSpec("historykit-pg-async", "historykit", "postgres", True, "SQLModelSaver async (PostgreSQL)"),
        SaverSpec("sqlite", "official", "sqlite", False, "SqliteSaver"),
        SaverSpec("sqlite-async", "official", "sqlite", True, "AsyncSqliteSaver"),
        SaverSpec("postgres", "official", "postgres", False, "PostgresSaver"),
        SaverSpec("postgres-async", "official", "postgres", True, "AsyncPostgresSaver"),
        SaverSpec("reference", "reference", "memory", False, "LangGraph alone (by-reference memory)"),
    )
}
OFFICIAL_OF = {
    "historykit-sqlite": "sqlite",
    "historykit-sqlite-async": "sqlite-async",
    "historykit-pg": "postgres",
    "historykit-pg-async": "postgres-async",
}


@dataclass
class Job:
    """One configuration, as the orchestrating process hands it to a worker."""

    saver: str
    state: StateKind
    mode: str
    """`graph` or `direct`."""
    steps: list[int]
    cap: float
    list_cap: float
    sqlite_path: str = ""
    postgres_url: str = ""
    """libpq URL of the configuration's own database."""
    analyze_every: int = 0
    """Run PostgreSQL's `ANALYZE` every this many steps, untimed (when the server's autovacuum is
    off, as it keeps the planner's statistics current otherwise); 0: never."""
    collect_before_read: bool = False
    """The reading process runs a full garbage collection before its cold read, as an application
    can at start-up, so the read does not pay for the objects the imports made."""


@dataclass
class Milestone:
    steps: int
    capped: bool
    step_ms_early: float | None
    step_ms: float
    cpu_ms: float
    elapsed_s: float
    messages: int
    payload_bytes: int
    db_bytes: int | None
    get_state_ms: float | None
    get_tuple_ms: float
    peak_rss_mb: float
    cold_read_ms: float | None = None
    cold_read_gc_ms: float | None = None
    """Of `cold_read_ms`, the time spent in full garbage collections."""
    cold_read_cpu_ms: float | None = None
    """The reading process's CPU time during the cold read (steadier than wall time on a loaded
    machine; the PostgreSQL server's own CPU is not in it)."""
    list_s: float | None = None
    list_count: int | None = None
    list_total: int | None = None
    list_capped: bool = False
    list_error: str | None = None
    list_warm_s: float | None = None
    reader_rss_mb: float | None = None
    saver_cpu_ms: float | None = None
    """The saver's own calls' CPU per step (the CPU of the thread each `get_tuple`, `put` and
    `put_writes` ran on, for as long as it ran), mean of the last `WINDOW` steps: the saver's
    share measured directly, in the same process, where `cpu_ms` minus LangGraph alone's is a
    difference of two processes. Synchronous savers only (an async call shares its thread with
    the graph's other tasks)."""


@dataclass
class Result:
    job: dict[str, Any]
    milestones: list[Milestone] = field(default_factory=list)
    error: str | None = None
    load: tuple[float, float] = (0.0, 0.0)
    """1-minute load average at the start and at the end."""


# ---------------------------------------------------------------------------------------------
# Savers
# ---------------------------------------------------------------------------------------------


class _ByReference:
    """A serializer that keeps the object: `InMemorySaver` then costs LangGraph nothing."""

    def dumps_typed(self, obj: Any) -> tuple[str, Any]:
        return "ref", copy.copy(obj) if isinstance(obj, dict) else obj

    def loads_typed(self, data: tuple[str, Any]) -> Any:
        return copy.copy(data[1]) if isinstance(data[1], dict) else data[1]


def _sqlalchemy_postgres(url: str) -> str:
    return "postgresql+psycopg://" + url.split("://", 1)[1]


@contextlib.asynccontextmanager
async def open_saver(spec: SaverSpec, job: Job) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    """A new saver instance on the job's database, set up, closed on exit."""
    if spec.family == "historykit":
        from historykit.checkpointers import SQLModelSaver

        url = (
            f"sqlite:///{job.sqlite_path}"
            if spec.backend == "sqlite"
            else _sqlalchemy_postgres(job.postgres_url)
        )
        saver = SQLModelSaver(url)
        try:
            if spec.asynchronous:
                await saver.asetup()
            else:
                saver.setup()
            yield saver
        finally:
            if spec.asynchronous:
                await saver.aclose()
            saver.close()
    elif spec.name == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(job.sqlite_path) as sqlite_saver:
            sqlite_saver.setup()
            yield sqlite_saver
    elif spec.name == "sqlite-async":
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(job.sqlite_path) as async_sqlite_saver:
            await async_sqlite_saver.setup()
            yield async_sqlite_saver
    elif spec.name == "postgres":
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(job.postgres_url) as pg_saver:
            pg_saver.setup()
            yield pg_saver
    elif spec.name == "postgres-async":
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        async with AsyncPostgresSaver.from_conn_string(job.postgres_url) as async_pg_saver:
            await async_pg_saver.setup()
            yield async_pg_saver
    elif spec.name == "reference":
        from langgraph.checkpoint.memory import InMemorySaver

        yield InMemorySaver(serde=_ByReference())  # type: ignore[arg-type]
    else:
        raise ValueError(f"unknown saver {spec.name!r}")


class Target:
    """The thread under test, through one saver instance: steps and reads, sync or async."""

    def __init__(self, spec: SaverSpec, saver: BaseCheckpointSaver[Any], state: StateKind, mode: str):
        self.spec = spec
        self.saver = saver
        self.mode = mode
        self.config: RunnableConfig = {"configurable": {"thread_id": THREAD}}
        self.graph = build_graph(saver, state) if mode == "graph" else None
        self.direct = DirectSteps(saver, state, THREAD) if mode == "direct" else None
        self.puts = 0
        self.saver_cpu = 0.0
        """CPU spent in the saver's own calls since the last `take_saver_cpu` (synchronous savers)."""
        self._lock = threading.Lock()
        if not spec.asynchronous:
            for name in ("get_tuple", "put", "put_writes"):
                setattr(saver, name, self._timed_call(getattr(saver, name)))

    def _timed_call(self, call: Callable[..., Any]) -> Callable[..., Any]:
        def timed_call(*args: Any, **kwargs: Any) -> Any:
            start = time.thread_time()
            try:
                return call(*args, **kwargs)
            finally:
                # Calls run on LangGraph's executor threads, one at a time per thread: each
                # thread's CPU for the call's duration is the call's.
                with self._lock:
                    self.saver_cpu += time.thread_time() - start

        return timed_call

    def take_saver_cpu(self) -> float | None:
        if self.spec.asynchronous:
            return None
        with self._lock:
            spent, self.saver_cpu = self.saver_cpu, 0.0
        return spent

    async def start(self) -> None:
        if self.direct is not None:
            config, checkpoint, metadata, versions = self.direct.start()
            self.direct.advance(await self._put(config, checkpoint, metadata, versions))

    async def step(self, step: int) -> None:
        if self.graph is not None:
            if self.spec.asynchronous:
                await self.graph.ainvoke(WORKLOAD.graph_input(step), self.config)
            else:
                self.graph.invoke(WORKLOAD.graph_input(step), self.config)
            return
        assert self.direct is not None
        (config, writes, task_id), (checkpoint, metadata, versions) = self.direct.step(step)
        if self.spec.asynchronous:
            await self.saver.aput_writes(config, writes, task_id)
        else:
            self.saver.put_writes(config, writes, task_id)
        self.direct.advance(await self._put(self.direct.config, checkpoint, metadata, versions))

    async def _put(self, config: Any, checkpoint: Any, metadata: Any, versions: Any) -> Any:
        if self.spec.asynchronous:
            return await self.saver.aput(config, checkpoint, metadata, versions)
        return self.saver.put(config, checkpoint, metadata, versions)

    async def messages(self) -> list[Any]:
        if self.direct is not None:
            return list(self.direct.messages)
        state = await self.get_state()
        return list(state.values.get("messages", []))

    async def get_state(self) -> Any:
        assert self.graph is not None
        if self.spec.asynchronous:
            return await self.graph.aget_state(self.config)
        return self.graph.get_state(self.config)

    async def get_tuple(self) -> Any:
        if self.spec.asynchronous:
            return await self.saver.aget_tuple(self.config)
        return self.saver.get_tuple(self.config)

    async def read(self) -> Any:
        """What a reader asks for: the graph's state, or the latest checkpoint (direct mode)."""
        return await (self.get_state() if self.graph is not None else self.get_tuple())

    async def list_all(
        self, cap: float, progress: Callable[[int, float], None] | None = None
    ) -> tuple[int, bool]:
        """List every checkpoint of the thread; `(count, capped)`."""
        start = time.perf_counter()
        count = 0
        if self.spec.asynchronous:
            agen = self.saver.alist(self.config)
            try:
                async for _ in agen:
                    count += 1
                    if progress:
                        progress(count, time.perf_counter() - start)
                    if time.perf_counter() - start > cap:
                        return count, True
            finally:
                await agen.aclose()  # type: ignore[attr-defined]
        else:
            gen = self.saver.list(self.config)
            try:
                for _ in gen:
                    count += 1
                    if progress:
                        progress(count, time.perf_counter() - start)
                    if time.perf_counter() - start > cap:
                        return count, True
            finally:
                gen.close()  # type: ignore[attr-defined]
        return count, False


# ---------------------------------------------------------------------------------------------
# Measurements
# ---------------------------------------------------------------------------------------------


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


@contextlib.contextmanager
def full_collections() -> Iterator[list[float]]:
    """Seconds spent in full (generation 2) garbage collections inside the block, one entry each.

    A new process that imported LangGraph carries every imported object as pending for the
    collector: its first full collection walks them all, and lands in whatever allocates enough
    first (here, often the cold read)."""
    spent: list[float] = []
    started: list[float] = []

    def callback(phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            started.append(time.perf_counter())
        elif started:
            spent.append(time.perf_counter() - started.pop())

    gc.callbacks.append(callback)
    try:
        yield spent
    finally:
        gc.callbacks.remove(callback)


def database_bytes(spec: SaverSpec, job: Job) -> int | None:
    if spec.backend == "sqlite":
        conn = sqlite3.connect(job.sqlite_path, timeout=60)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
        path = Path(job.sqlite_path)
        return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())
    if spec.backend == "postgres":
        import psycopg

        with psycopg.connect(job.postgres_url, autocommit=True) as pg:
            row = pg.execute(
                "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE c.relkind IN ('r', 'p', 'm') "
                "AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'"
            ).fetchone()
        assert row is not None
        return int(row[0])
    return None


def checkpoint_count(spec: SaverSpec, job: Job) -> int | None:
    table = "historykit_checkpoint" if spec.family == "historykit" else "checkpoints"
    if spec.backend == "sqlite":
        conn = sqlite3.connect(job.sqlite_path, timeout=60)
        try:
            return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
        finally:
            conn.close()
    if spec.backend == "postgres":
        import psycopg

        with psycopg.connect(job.postgres_url, autocommit=True) as pg:
            row = pg.execute(f"SELECT count(*) FROM {table}").fetchone()
        assert row is not None
        return int(row[0])
    return None


async def timed(call: Callable[[], Any], repeat: int = READS) -> float:
    """Median milliseconds of `repeat` awaited calls."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def run_reader(job: Job, timeout: float) -> dict[str, Any]:
    """The cold read and the full `list`, in a new process on a new saver instance."""
    command = [sys.executable, __file__, "--reader", json.dumps(asdict(job))]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    last: dict[str, Any] = {}
    for line in out.splitlines():
        if line.startswith("READER "):
            last = json.loads(line[len("READER ") :])
    if proc.returncode != 0 and not last.get("done"):
        last["error"] = (err.strip().splitlines() or [f"exit code {proc.returncode}"])[-1][:200]
        if proc.returncode < 0:
            last["error"] = f"killed after {timeout:.0f} s"
    return last


async def reader_main(job: Job) -> None:
    """Entry of the reading process: report as it goes, so a killed reader still tells something."""
    resource.setrlimit(resource.RLIMIT_AS, (READER_MEMORY_LIMIT, READER_MEMORY_LIMIT))
    spec = SAVERS[job.saver]
    report: dict[str, Any] = {}

    def emit() -> None:
        report["rss_mb"] = peak_rss_mb()
        print("READER " + json.dumps(report), flush=True)

    async with open_saver(spec, job) as saver:
        target = Target(spec, saver, job.state, job.mode)
        # Connections and tables are ready before timing; the thread itself is not read yet.
        other = Target(spec, saver, job.state, job.mode)
        other.config = {"configurable": {"thread_id": "warm-up"}}
        await other.get_tuple()
        if job.collect_before_read:
            gc.collect()
        with full_collections() as collections:
            start, start_cpu = time.perf_counter(), time.process_time()
            await target.read()
            report["cold_read_ms"] = (time.perf_counter() - start) * 1000
            report["cold_read_cpu_ms"] = (time.process_time() - start_cpu) * 1000
        report["cold_read_gc_ms"] = sum(collections) * 1000
        emit()
        last_emit = [time.perf_counter()]

        def progress(count: int, elapsed: float) -> None:
            if time.perf_counter() - last_emit[0] > 0.5:
                report.update(list_count=count, list_s=elapsed, list_capped=True)
                emit()
                last_emit[0] = time.perf_counter()

        start = time.perf_counter()
        try:
            count, capped = await target.list_all(job.list_cap, progress)
        except MemoryError:
            report["error"] = f"out of memory (reader limited to {READER_MEMORY_LIMIT / 1024**3:.0f} GB)"
            emit()
            return
        report.update(list_count=count, list_s=time.perf_counter() - start, list_capped=capped, done=True)
        emit()


async def measure(
    spec: SaverSpec,
    job: Job,
    target: Target,
    steps_done: int,
    capped: bool,
    wall: list[float],
    cpu: list[float],
) -> Milestone:
    early: float | None = None
    if steps_done >= EARLY_STEP:
        early = statistics.mean(wall[EARLY_STEP - 20 : EARLY_STEP]) * 1000
    messages = await target.messages()
    count, payload = payload_bytes(messages)
    milestone = Milestone(
        steps=steps_done,
        capped=capped,
        step_ms_early=early,
        step_ms=statistics.mean(wall[-WINDOW:]) * 1000,
        cpu_ms=statistics.mean(cpu[-WINDOW:]) * 1000,
        elapsed_s=sum(wall),
        messages=count,
        payload_bytes=payload,
        db_bytes=database_bytes(spec, job),
        get_state_ms=await timed(target.get_state) if target.graph is not None else None,
        get_tuple_ms=await timed(target.get_tuple),
        peak_rss_mb=peak_rss_mb(),
    )
    if spec.family == "reference":
        start = time.perf_counter()
        milestone.list_count, milestone.list_capped = await target.list_all(job.list_cap)
        milestone.list_s = milestone.list_warm_s = time.perf_counter() - start
        return milestone
    milestone.list_total = checkpoint_count(spec, job)
    read = run_reader(job, timeout=job.list_cap + 60)
    milestone.cold_read_ms = read.get("cold_read_ms")
    milestone.cold_read_gc_ms = read.get("cold_read_gc_ms")
    milestone.cold_read_cpu_ms = read.get("cold_read_cpu_ms")
    milestone.list_s = read.get("list_s")
    milestone.list_count = read.get("list_count")
    milestone.list_capped = bool(read.get("list_capped")) or not read.get("done")
    milestone.list_error = read.get("error")
    milestone.reader_rss_mb = read.get("rss_mb")
    if spec.family == "historykit":
        start = time.perf_counter()
        _, warm_capped = await target.list_all(job.list_cap)
        milestone.list_warm_s = None if warm_capped else time.perf_counter() - start
    return milestone


def analyze(job: Job) -> None:
    import psycopg

    with psycopg.connect(job.postgres_url, autocommit=True) as pg:
        pg.execute("ANALYZE")


async def worker_main(job: Job) -> Result:
    """Entry of a configuration's process: step, and measure at each milestone."""
    spec = SAVERS[job.saver]
    result = Result(job=asdict(job))
    load_start = os.getloadavg()[0]
    WORKLOAD.prepare(max(job.steps))
    wall: list[float] = []
    cpu: list[float] = []
    saver_cpu: list[float] = []
    async with open_saver(spec, job) as saver:
        target = Target(spec, saver, job.state, job.mode)
        await target.start()
        milestones = sorted(set(job.steps))
        for step in range(milestones[-1]):
            target.take_saver_cpu()
            start_wall, start_cpu = time.perf_counter(), time.process_time()
            await target.step(step)
            wall.append(time.perf_counter() - start_wall)
            cpu.append(time.process_time() - start_cpu)
            spent = target.take_saver_cpu()
            if spent is not None:
                saver_cpu.append(spent)
            done = step + 1
            over = sum(wall) > job.cap
            if (
                spec.backend == "postgres"
                and job.analyze_every
                and (done % job.analyze_every == 0 or done in milestones or over)
            ):
                analyze(job)
            if done in milestones or over:
                milestone = await measure(spec, job, target, done, over and done not in milestones, wall, cpu)
                if saver_cpu and spec.family != "reference":
                    milestone.saver_cpu_ms = statistics.mean(saver_cpu[-WINDOW:]) * 1000
                result.milestones.append(milestone)
                target.take_saver_cpu()  # the measurement's own reads are not a step's
                print(
                    f"  {spec.name} {job.state} {job.mode}: {done} steps measured",
                    file=sys.stderr,
                    flush=True,
                )
            if over:
                break
    result.load = (load_start, os.getloadavg()[0])
    return result


# ---------------------------------------------------------------------------------------------
# Orchestration
# ---------------------------------------------------------------------------------------------


def postgres_server(admin_url: str) -> tuple[str | None, bool]:
    """`(why not, autovacuum)`: `None` when the server answers, else why not; and whether its
    autovacuum keeps the planner's statistics current."""
    try:
        import psycopg

        with psycopg.connect(admin_url, connect_timeout=3) as conn:
            row = conn.execute("SHOW autovacuum").fetchone()
            return None, bool(row and row[0] == "on")
    except Exception as exc:  # any failure means: skip PostgreSQL, and say why
        return f"{type(exc).__name__}: {exc}".strip(), False


@contextlib.contextmanager
def job_database(job: Job, spec: SaverSpec, workdir: Path, admin_url: str) -> Any:
    """A SQLite file or a PostgreSQL database for one configuration, removed afterwards."""
    if spec.backend == "sqlite":
        directory = Path(tempfile.mkdtemp(prefix="bench-", dir=workdir))
        job.sqlite_path = str(directory / "checkpoints.db")
        try:
            yield
        finally:
            shutil.rmtree(directory, ignore_errors=True)
    elif spec.backend == "postgres":
        import psycopg

        name = f"historykit_bench_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        base, _, _ = admin_url.rpartition("/")
        job.postgres_url = f"{base}/{name}"
        try:
            yield
        finally:
            with psycopg.connect(admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    else:
        yield


def load_result(raw: dict[str, Any]) -> Result:
    return Result(
        job=raw["job"],
        milestones=[Milestone(**m) for m in raw["milestones"]],
        error=raw.get("error"),
        load=(raw.get("load") or (0.0, 0.0))[0:2],
    )


def run_job(job: Job, workdir: Path, admin_url: str) -> Result:
    spec = SAVERS[job.saver]
    with job_database(job, spec, workdir, admin_url):
        # Beyond the step cap: a reader per milestone, the measurements, and slack.
        timeout = job.cap + len(job.steps) * (2 * job.list_cap + 300) + 300
        command = [sys.executable, __file__, "--worker", json.dumps(asdict(job))]
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return Result(job=asdict(job), error=f"killed after {timeout:.0f} s")
        for line in reversed(proc.stdout.splitlines()):
            if line.startswith("RESULT "):
                return load_result(json.loads(line[len("RESULT ") :]))
        tail = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
        return Result(job=asdict(job), error=tail[:300])


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------


def _mb(n: int | None) -> str:
    if n is None:
        return "-"
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def _list(m: Milestone) -> str:
    if m.list_error and m.list_s is None:
        return m.list_error[:24]
    if m.list_s is None:
        return "-"
    if m.list_capped:
        share = f" ({m.list_count}/{m.list_total})" if m.list_total else ""
        return f">{m.list_s:.0f} s{share}"
    text = f"{m.list_s:.2f} s" if m.list_s < 10 else f"{m.list_s:.0f} s"
    if m.list_warm_s is not None:
        text += f" / {m.list_warm_s:.2f}"
    return text


def _steps(m: Milestone) -> str:
    return f"capped at {m.steps}" if m.capped else str(m.steps)


LEGEND = """\
ms@50: mean of steps 31-50; ms/step: mean of the last 50 steps; x@50: their ratio; cpu: process CPU ms/step
DB: file+WAL (SQLite) or the saver's tables, indexes, TOAST (PostgreSQL); x pay: DB / message payload
state/tuple: warm get_state/get_tuple ms (median of 5); cold: first read (ms) in a new process
list: full list in a new process (cold) / again on the running saver (warm)
RSS/rRSS: peak MB of the stepping/reading process"""

HEADER = (
    f"{'saver':<26} {'steps':>14} {'ms@50':>7} {'ms/step':>8} {'x@50':>5} {'cpu':>6} {'DB':>9} "
    f"{'x pay':>7} {'state':>6} {'tuple':>6} {'cold':>6} {'list cold / warm':>22} {'RSS':>6} {'rRSS':>6}"
)


def row(name: str, m: Milestone) -> str:
    growth = m.step_ms / m.step_ms_early if m.step_ms_early else None
    ratio = f"{m.db_bytes / m.payload_bytes:.1f}" if m.db_bytes is not None and m.payload_bytes else "-"
    return (
        f"{name:<26} {_steps(m):>14} {_ms(m.step_ms_early):>7} {_ms(m.step_ms):>8} "
        f"{(f'{growth:.1f}' if growth else '-'):>5} {_ms(m.cpu_ms):>6} {_mb(m.db_bytes):>9} {ratio:>7} "
        f"{_ms(m.get_state_ms):>6} {_ms(m.get_tuple_ms):>6} {_ms(m.cold_read_ms):>6} {_list(m):>22} "
        f"{m.peak_rss_mb:>6.0f} {(f'{m.reader_rss_mb:.0f}' if m.reader_rss_mb else '-'):>6}"
    )


def milestone_at(result: Result, steps: int) -> Milestone | None:
    """The measurement at `steps`, or the capped one the run ended with before it."""
    for m in result.milestones:
        if m.steps == steps:
            return m
    capped = [m for m in result.milestones if m.capped and m.steps < steps]
    return capped[-1] if capped else None


def _ratio(official: float | None, ours: float | None, capped: bool = False) -> str:
    if official is None or ours is None or ours <= 0:
        return "-"
    return (
        f"{'>' if capped else ''}{official / ours:.0f}x"
        if official / ours >= 10
        else f"{official / ours:.1f}x"
    )


def print_report(results: list[Result], steps: list[int], notes: list[str]) -> None:
    by_key = {(r.job["saver"], r.job["state"], r.job["mode"]): r for r in results}
    modes = list(dict.fromkeys(r.job["mode"] for r in results))
    states = list(dict.fromkeys(r.job["state"] for r in results))
    print()
    print("Checkpointers: agent workload (tool call + 2-8 KB tool result per step, a user message every 7th)")
    print(LEGEND)
    for note in notes:
        print(f"note: {note}")
    for mode in modes:
        for state in states:
            print()
            print(f"== {mode} mode, {state} state " + "=" * 60)
            print(HEADER)
            for n in steps:
                for name in SAVERS:
                    result = by_key.get((name, state, mode))
                    if result is None:
                        continue
                    if result.error and not result.milestones:
                        if n == steps[0]:
                            print(f"{name:<26} failed: {result.error}")
                        continue
                    m = milestone_at(result, n)
                    if m is None:
                        continue
                    if m.steps != n and any(o.steps == m.steps for o in result.milestones if o is not m):
                        continue
                    if m.capped and n != min(s for s in steps if s >= m.steps):
                        continue  # a capped run is shown once, under the first milestone it missed
                    print(row(name, m))
                print()
    print_ratios(by_key, steps, modes, states)
    print_targets(by_key, steps)
    print_server_targets(by_key, steps)


def print_ratios(
    by_key: dict[tuple[str, str, str], Result], steps: list[int], modes: list[str], states: list[str]
) -> None:
    print("Official saver / SQLModelSaver (higher: historykit is better by that factor)")
    print(
        f"{'pair':<58} {'steps':>6} {'ms/step':>8} {'DB size':>8} {'get_state':>9} {'get_tuple':>9} "
        f"{'cold':>6} {'list':>7} {'RSS':>6}"
    )
    for mode in modes:
        for state in states:
            for ours, theirs in OFFICIAL_OF.items():
                a, b = by_key.get((ours, state, mode)), by_key.get((theirs, state, mode))
                if a is None or b is None:
                    continue
                for n in steps:
                    m_ours, m_theirs = milestone_at(a, n), milestone_at(b, n)
                    if m_ours is None or m_theirs is None or m_ours.steps != n:
                        continue
                    note = f"@{m_theirs.steps}" if m_theirs.steps != n else ""
                    print(
                        f"{f'{theirs} / {ours} ({mode}, {state})':<58} {f'{n}{note}':>6} "
                        f"{_ratio(m_theirs.step_ms, m_ours.step_ms):>8} "
                        f"{_ratio(m_theirs.db_bytes, m_ours.db_bytes):>8} "
                        f"{_ratio(m_theirs.get_state_ms, m_ours.get_state_ms):>9} "
                        f"{_ratio(m_theirs.get_tuple_ms, m_ours.get_tuple_ms):>9} "
                        f"{_ratio(m_theirs.cold_read_ms, m_ours.cold_read_ms):>6} "
                        f"{_ratio(m_theirs.list_s, m_ours.list_s, m_theirs.list_capped):>7} "
                        f"{_ratio(m_theirs.peak_rss_mb, m_ours.peak_rss_mb):>6}"
                    )
    print(
        "(a pair measured where the official saver was capped earlier compares at different step counts: @N)"
    )


def print_targets(by_key: dict[tuple[str, str, str], Result], steps: list[int]) -> None:
    result = by_key.get(("historykit-sqlite", "plain", "graph"))
    n = max(steps)
    m = milestone_at(result, n) if result else None
    print()
    if m is None or m.steps != n:
        print(f"Targets: need historykit-sqlite, graph mode, plain state, at {n} steps (not measured)")
        return
    reference = by_key.get(("reference", "plain", "graph"))
    ref = milestone_at(reference, n) if reference else None
    checks = [
        (
            f"DB size <= 3x payload ({_mb(m.payload_bytes)})",
            m.db_bytes is not None and m.db_bytes <= 3 * m.payload_bytes,
            f"{_mb(m.db_bytes)} = {m.db_bytes / m.payload_bytes:.2f}x" if m.db_bytes is not None else "-",
        ),
        (
            "a step <= 10 ms end to end",
            m.step_ms <= 10,
            f"{m.step_ms:.1f} ms"
            + (
                f" (LangGraph alone {ref.step_ms:.1f} ms; the saver's share {m.step_ms - ref.step_ms:.1f} ms)"
                if ref
                else ""
            ),
        ),
        (
            "a step within 1.5x of step 50",
            m.step_ms_early is not None and m.step_ms <= 1.5 * m.step_ms_early,
            f"{m.step_ms / m.step_ms_early:.2f}x" if m.step_ms_early else "-",
        ),
        (
            "get_state <= 20 ms (warm)",
            m.get_state_ms is not None and m.get_state_ms <= 20,
            f"{_ms(m.get_state_ms)} ms",
        ),
        (
            "get_state <= 20 ms (cold, new process)",
            m.cold_read_ms is not None and m.cold_read_ms <= 20,
            f"{_ms(m.cold_read_ms)} ms"
            + (
                f" (of which {m.cold_read_gc_ms:.0f} ms in full garbage collections)"
                if m.cold_read_gc_ms is not None
                else ""
            ),
        ),
        (
            "full list < 2 s (cold, new process)",
            m.list_s is not None and not m.list_capped and m.list_s < 2,
            _list(m),
        ),
    ]
    print(f"Targets, SQLModelSaver on SQLite, real graph, plain add_messages, {n} steps:")
    for what, ok, value in checks:
        print(f"  {'PASS' if ok else 'MISS'}  {what:<42} {value}")
    early_ref = milestone_at(reference, EARLY_STEP) if reference else None
    early = milestone_at(result, EARLY_STEP) if result else None
    if ref and early and early_ref and early.steps == EARLY_STEP:
        print(
            "  CPU per step (all threads), SQLModelSaver / LangGraph alone / difference: "
            f"step {EARLY_STEP}: {early.cpu_ms:.1f} / {early_ref.cpu_ms:.1f} / "
            f"{early.cpu_ms - early_ref.cpu_ms:.1f} ms; "
            f"step {n}: {m.cpu_ms:.1f} / {ref.cpu_ms:.1f} / {m.cpu_ms - ref.cpu_ms:.1f} ms"
        )
    if ref and ref.step_ms_early:
        # A saver that adds a constant s ms a step is within 1.5x of step 50 only when
        # (late + s) <= 1.5 (early + s), i.e. s >= 2 (late - 1.5 early): LangGraph's own growth
        # sets a floor on the saver's cost, while 10 ms a step sets a ceiling of 10 - late.
        floor = 2 * (ref.step_ms - 1.5 * ref.step_ms_early)
        ceiling = 10 - ref.step_ms
        verdict = "the two step targets exclude each other" if floor > ceiling else "both reachable"
        print(
            f"  LangGraph alone: {ref.step_ms_early:.2f} ms a step at step {EARLY_STEP}, "
            f"{ref.step_ms:.2f} ms at step {n} ({ref.step_ms / ref.step_ms_early:.1f}x). "
            f"A saver adding a constant s ms a step is within 1.5x of step {EARLY_STEP} "
            f"only if s >= {floor:.1f} ms, and at most 10 ms a step only if s <= {ceiling:.1f} ms: "
            f"{verdict}"
        )
    direct = by_key.get(("historykit-sqlite", "plain", "direct"))
    own, own_early = (milestone_at(direct, n), milestone_at(direct, EARLY_STEP)) if direct else (None, None)
    if own and own_early and own.steps == n and own_early.step_ms_early:
        print(
            "  the saver alone (direct put_writes + put of one superstep a step): "
            f"{own.step_ms_early:.2f} ms at step {EARLY_STEP}, {own.step_ms:.2f} ms at step {n} "
            f"({own.step_ms / own.step_ms_early:.2f}x)"
        )


SERVER_PAIRS = (("historykit-sqlite", "sqlite"), ("historykit-pg", "postgres"))
"""historykit's saver and the official one on the same backend, compared by the server targets."""


def _own(result: Result | None, reference: Result | None, n: int) -> float | None:
    """A saver's own CPU per step at milestone `n`: the step's CPU minus LangGraph's alone
    (the by-reference memory saver) at the same step, both in one long-running process."""
    m = milestone_at(result, n) if result else None
    ref = milestone_at(reference, n) if reference else None
    if m is None or ref is None or m.steps != n or ref.steps != n:
        return None
    return max(m.cpu_ms - ref.cpu_ms, 0.01)


def print_server_targets(by_key: dict[tuple[str, str, str], Result], steps: list[int]) -> None:
    """The saver rows of issue 23's "Done means", graph mode, plain state, from this one run:
    own CPU per step against the official saver at step 50 (<= 1/3) and at 1,000 (<= 1/10), its
    growth from 50 to the largest milestone (<= 1.3x), the cold `get_state` (>= 2x faster) and the
    database size (<= 1.0x the serialized payload)."""
    reference = by_key.get(("reference", "plain", "graph"))
    last = max(steps)
    print()
    print("Server targets (graph mode, plain state; own CPU = step CPU minus LangGraph alone, in ms):")
    for ours_name, theirs_name in SERVER_PAIRS:
        ours, theirs = by_key.get((ours_name, "plain", "graph")), by_key.get((theirs_name, "plain", "graph"))
        if ours is None:
            continue
        checks: list[tuple[str, bool | None, str]] = []
        for n, bound in ((EARLY_STEP, 1 / 3), (1000, 1 / 10)):
            mine, official = _own(ours, reference, n), _own(theirs, reference, n)
            if mine is None or official is None:
                checks.append((f"own CPU at {n} <= {bound:.2g}x {theirs_name}", None, "not measured"))
                continue
            ratio = mine / official
            checks.append(
                (
                    f"own CPU at {n} <= {bound:.2g}x {theirs_name}",
                    ratio <= bound,
                    f"{mine:.2f} / {official:.2f} ms = {ratio:.2f}x",
                )
            )
        for n, bound in ((EARLY_STEP, 1 / 3), (1000, 1 / 10)):
            m, t = milestone_at(ours, n), (milestone_at(theirs, n) if theirs else None)
            if m and t and m.steps == n and t.steps == n and m.saver_cpu_ms and t.saver_cpu_ms:
                ratio = m.saver_cpu_ms / t.saver_cpu_ms
                checks.append(
                    (
                        f"saver calls' CPU at {n} <= {bound:.2g}x {theirs_name}",
                        ratio <= bound,
                        f"{m.saver_cpu_ms:.2f} / {t.saver_cpu_ms:.2f} ms = {ratio:.2f}x",
                    )
                )
        m_early, m_late = milestone_at(ours, EARLY_STEP), milestone_at(ours, last)
        if (
            last > EARLY_STEP
            and m_early
            and m_late
            and m_early.saver_cpu_ms
            and m_late.saver_cpu_ms
            and m_late.steps == last
        ):
            growth = m_late.saver_cpu_ms / m_early.saver_cpu_ms
            checks.append(
                (
                    f"saver calls' CPU growth {EARLY_STEP} -> {last} <= 1.3x",
                    growth <= 1.3,
                    f"{m_early.saver_cpu_ms:.2f} -> {m_late.saver_cpu_ms:.2f} ms = {growth:.2f}x",
                )
            )
        early, late = _own(ours, reference, EARLY_STEP), _own(ours, reference, last)
        checks.append(
            (
                f"own CPU growth {EARLY_STEP} -> {last} <= 1.3x",
                None if early is None or late is None else late / early <= 1.3,
                "not measured"
                if early is None or late is None
                else f"{early:.2f} -> {late:.2f} ms = {late / early:.2f}x",
            )
        )
        m_ours = milestone_at(ours, last)
        m_theirs = milestone_at(theirs, last) if theirs else None
        if m_ours and m_theirs and m_ours.cold_read_ms and m_theirs.cold_read_ms:
            speedup = m_theirs.cold_read_ms / m_ours.cold_read_ms
            checks.append(
                (
                    f"cold get_state at {last} >= 2x faster than {theirs_name}",
                    speedup >= 2 and m_theirs.steps == last,
                    f"{m_ours.cold_read_ms:.1f} vs {m_theirs.cold_read_ms:.1f} ms"
                    f"{'' if m_theirs.steps == last else f' (theirs at {m_theirs.steps})'} = {speedup:.2f}x",
                )
            )
        if m_ours and m_theirs and m_ours.cold_read_cpu_ms and m_theirs.cold_read_cpu_ms:
            speedup = m_theirs.cold_read_cpu_ms / m_ours.cold_read_cpu_ms
            checks.append(
                (
                    f"cold get_state CPU at {last} >= 2x less than {theirs_name}",
                    speedup >= 2 and m_theirs.steps == last,
                    f"{m_ours.cold_read_cpu_ms:.1f} vs {m_theirs.cold_read_cpu_ms:.1f} ms = {speedup:.2f}x",
                )
            )
        if m_ours and m_ours.db_bytes is not None and m_ours.steps == last:
            size = m_ours.db_bytes / m_ours.payload_bytes
            checks.append((f"DB size at {last} <= 1.0x payload", size <= 1.0, f"{size:.2f}x"))
        print(f"  {ours_name}:")
        for what, ok, value in checks:
            verdict = "----" if ok is None else ("PASS" if ok else "MISS")
            print(f"    {verdict}  {what:<48} {value}")


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------


def _names(text: str, known: Sequence[str], what: str) -> list[str]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown {what}: {', '.join(unknown)} (choose from {', '.join(known)})")
    return names


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--steps", default="50,500,1000", help="milestones, comma-separated (default 50,500,1000)"
    )
    parser.add_argument("--savers", default=",".join(SAVERS), help="savers, comma-separated (default: all)")
    parser.add_argument("--states", default="plain,delta", help="plain, delta (default both)")
    parser.add_argument("--modes", default="graph,direct", help="graph, direct (default both)")
    parser.add_argument(
        "--cap", type=float, default=180.0, help="seconds of steps per configuration (default 180)"
    )
    parser.add_argument("--list-cap", type=float, default=15.0, help="seconds for one full list (default 15)")
    parser.add_argument("--quick", action="store_true", help="50 and 200 steps, 60 s caps, 5 s lists")
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES, help="admin URL of the PostgreSQL server")
    parser.add_argument(
        "--workdir", default=None, help="where SQLite files go (default: a temporary directory)"
    )
    parser.add_argument(
        "--collect-before-read",
        action="store_true",
        help="run a full garbage collection in the reading process before its cold read",
    )
    parser.add_argument("--json", default=None, help="also write the raw results to this file")
    parser.add_argument("--report", default=None, help="print the report of a --json file, run nothing")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--reader", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        result = asyncio.run(worker_main(Job(**json.loads(args.worker))))
        print("RESULT " + json.dumps(asdict(result)), flush=True)
        return
    if args.reader:
        asyncio.run(reader_main(Job(**json.loads(args.reader))))
        return

    if args.report:
        saved = [load_result(raw) for raw in json.loads(Path(args.report).read_text())]
        measured = sorted({s for r in saved for s in r.job["steps"]})
        print_report(saved, measured, [f"results read from {args.report}"])
        return
    if args.quick:
        args.steps, args.cap, args.list_cap = "50,200", 60.0, 5.0
    steps = sorted({int(s) for s in args.steps.split(",") if s.strip()})
    if not steps or steps[0] < 1:
        raise SystemExit("--steps needs positive step counts")
    savers = _names(args.savers, list(SAVERS), "saver")
    states = _names(args.states, ["plain", "delta"], "state")
    modes = _names(args.modes, ["graph", "direct"], "mode")
    notes: list[str] = []
    analyze_every = 0
    if any(SAVERS[s].backend == "postgres" for s in savers):
        why, autovacuum = postgres_server(args.postgres)
        if why:
            notes.append(f"PostgreSQL savers skipped: {args.postgres} is not reachable ({why})")
            savers = [s for s in savers if SAVERS[s].backend != "postgres"]
        elif not autovacuum:
            analyze_every = ANALYZE_EVERY
            notes.append(
                f"the PostgreSQL server runs without autovacuum: ANALYZE runs every {ANALYZE_EVERY} steps "
                "and before each measurement, untimed, for every PostgreSQL saver"
            )
    if args.collect_before_read:
        notes.append(
            "cold reads ran after a full garbage collection in the reading process (--collect-before-read)"
        )
    jobs = [
        Job(
            saver=s,
            state=state,  # type: ignore[arg-type]
            mode=mode,
            steps=steps,
            cap=args.cap,
            list_cap=args.list_cap,
            analyze_every=analyze_every,
            collect_before_read=args.collect_before_read,
        )
        for mode in modes
        for state in states
        for s in savers
        if not (SAVERS[s].family == "reference" and mode == "direct")
    ]
    workdir_ctx = (
        contextlib.nullcontext(args.workdir)
        if args.workdir
        else tempfile.TemporaryDirectory(prefix="hk-bench-")
    )
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    results: list[Result] = []
    began = time.perf_counter()
    with workdir_ctx as workdir:
        Path(workdir).mkdir(parents=True, exist_ok=True)
        for i, job in enumerate(jobs, 1):
            print(
                f"[{i}/{len(jobs)}] {job.saver}, {job.state} state, {job.mode} mode",
                file=sys.stderr,
                flush=True,
            )
            start = time.perf_counter()
            result = run_job(job, Path(workdir), args.postgres)
            results.append(result)
            if args.json:  # after each configuration, so an interrupted run keeps what it measured
                Path(args.json).write_text(json.dumps([asdict(r) for r in results], indent=1))
            status = f"error: {result.error}" if result.error else "ok"
            print(f"    {time.perf_counter() - start:.0f} s, {status}", file=sys.stderr, flush=True)
    loads = [load for r in results for load in r.load if load]
    notes.append(
        f"{len(jobs)} configurations in {(time.perf_counter() - began) / 60:.1f} min on "
        f"{os.cpu_count()} CPUs; 1-min load average during the runs "
        f"{min(loads, default=0):.1f}-{max(loads, default=0):.1f}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in results], indent=1))
    print_report(results, steps, notes)


if __name__ == "__main__":
    main()
