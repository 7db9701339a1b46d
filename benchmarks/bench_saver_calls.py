"""The saver's own calls, alone: CPU per superstep of `put_writes` + `put` + `get_tuple`.

`bench_checkpointers.py` measures a saver inside a real graph, where LangGraph's own work and its
thread pool make a step's CPU noisy on a shared machine. This measures only historykit's
`SQLModelSaver` calls for one superstep as LangGraph makes them (`checkpointer_workload.py`'s
`DirectSteps`: the step's writes, the next checkpoint, then reading it back), sync or async, on a
new SQLite file or a new PostgreSQL database, for `--steps` steps after as many warm-up steps, in
CPU time of this process (the database server's own CPU is not in it).

It is meant for A/B comparisons of two checkouts of historykit, run in turn on the same machine:

```bash
for i in 1 2 3 4 5 6 7; do
  for tree in ../before .; do
    PYTHONPATH=$tree .venv/bin/python benchmarks/bench_saver_calls.py --backend postgres --mode async
  done
done
```

and reports one line: milliseconds of CPU per superstep. Compare the fastest (or the median) of each
side: other processes only ever add time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from checkpointer_workload import WORKLOAD, DirectSteps

from historykit.checkpointers import SQLModelSaver

ADMIN_URL = os.environ.get("HISTORYKIT_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")


async def measure(saver: SQLModelSaver, *, asynchronous: bool, steps: int) -> float:
    """CPU milliseconds per superstep over `steps` steps, after as many warm-up steps."""
    direct = DirectSteps(saver, "plain", "bench")
    start = direct.start()
    direct.advance(await saver.aput(*start) if asynchronous else saver.put(*start))
    spent = 0.0
    for step in range(2 * steps):
        (config, writes, task_id), (checkpoint, metadata, versions) = direct.step(step)
        began = time.process_time()
        if asynchronous:
            await saver.aput_writes(config, writes, task_id)
            saved = await saver.aput(direct.config, checkpoint, metadata, versions)
            await saver.aget_tuple(saved)
        else:
            saver.put_writes(config, writes, task_id)
            saved = saver.put(direct.config, checkpoint, metadata, versions)
            saver.get_tuple(saved)
        if step >= steps:
            spent += time.process_time() - began
        direct.advance(saved)
    return spent * 1000 / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--mode", choices=("sync", "async"), default="sync")
    parser.add_argument("--steps", type=int, default=50, help="measured steps (after as many warm-up steps)")
    args = parser.parse_args()
    WORKLOAD.prepare(2 * args.steps + 10)
    asynchronous = args.mode == "async"
    with tempfile.TemporaryDirectory(prefix="saver-calls-") as workdir:
        if args.backend == "sqlite":
            url, database = f"sqlite:///{Path(workdir) / 'checkpoints.db'}", None
        else:
            import psycopg

            database = f"historykit_calls_{uuid.uuid4().hex[:10]}"
            with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{database}"')
            url = f"{ADMIN_URL.rpartition('/')[0]}/{database}"
        try:
            saver = SQLModelSaver(url)
            saver.setup()

            async def run() -> Any:
                try:
                    return await measure(saver, asynchronous=asynchronous, steps=args.steps)
                finally:
                    if asynchronous:
                        await saver.aclose()

            print(f"{asyncio.run(run()):.3f}")
            saver.close()
        finally:
            if database is not None:
                import psycopg

                with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
                    conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


if __name__ == "__main__":
    main()
