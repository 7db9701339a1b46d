"""A worker process of the handoff tests: one `SQLModelSaver` and one agent for its lifetime (its
caches stay warm for what it served, and stale for what other workers served since), serving the
turns it is sent in its inbox until it is sent `None`."""

from __future__ import annotations

import os
import traceback
from multiprocessing.queues import Queue
from typing import Any

Job = tuple[str, str, int]
"""(thread label, thread id, turn)."""


def serve(name: str, url: str, env: dict[str, str], inbox: Queue[Job | None], outbox: Queue[Any]) -> None:
    os.environ.update(env)
    from langchain_core.messages import HumanMessage

    from historykit.checkpointers import SQLModelSaver
    from tests.deploy import agent_app

    with SQLModelSaver(url) as saver:
        graph = agent_app.build(saver)
        outbox.put((name, "ready", None))
        while (job := inbox.get()) is not None:
            label, thread_id, turn = job
            try:
                out = graph.invoke(
                    {"messages": [HumanMessage(agent_app.prompt(label, turn))]},
                    {"configurable": {"thread_id": thread_id}},
                )
                outbox.put((name, "done", (label, turn, out["messages"][-1].type)))
            except Exception:
                outbox.put((name, "error", (label, turn, traceback.format_exc())))
