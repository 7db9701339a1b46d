"""`make demo`: a real agent session replayed offline through Pydantic AI and LangGraph, with historykit.

The bundled sample (`data/sample_session.jsonl`, a real Claude Code sub-agent session under the MIT
license: `data/SAMPLE-SOURCE.md`) is replayed model call by model call, first by a Pydantic AI agent,
then by a LangChain v1 agent (a LangGraph graph). Nothing calls an LLM: the model is a stand-in that
answers each call with the session's next assistant message, and each tool returns the result the
session recorded for that call (the replay models of `historykit.testing`). Everything else is the
real thing:

- the agent runs historykit's default pipeline (`historykit.default_pipeline()`) before every model
  call, in persistent mode: the Pydantic AI `HistoryKit` capability, the LangChain
  `HistoryKitMiddleware(persist=True)`;
- the context window comes from the model's profile, set small enough (10,000 tokens by default)
  that the pipeline clears old tool outputs and summarizes while the session runs (the raw
  history grows to more than twice the window);
- every model call is persisted as it happens: Pydantic AI's conversation in
  `SQLModelConversationStore`, the LangGraph thread in `SQLModelSaver`, both in one SQLite file
  (`./.historykit-demo/demo.db` by default);
- a live gauge (`historykit.Gauge`, fed every report) shows the tokens each call sends against
  the window, next to what the raw history
  would have sent, and each compaction is announced as it happens.

It ends with the report (tokens sent, prompt-cache reuse, compactions, per processor), the stored
thread with its compaction markers (`transcript()`), and where the database file is.

Run: `python -m historykit.demo [--window N] [--db PATH_OR_URL] [--session FILE] [--delay SECONDS]
[--only pydantic-ai|langgraph]`.

The modules, one per concern: `_replay_run` (`ReplayRun`, what a run did), `_pydantic_ai` and
`_langgraph` (the two runs), `_live` (the display while a run replays), `_render` (the printout
after), `_command` (the options and `main`), `__main__` (`python -m`).

Example:
    ```python
    import historykit
    from historykit.demo import run_langgraph
    from historykit.testing import Recording

    run = run_langgraph(Recording.load(), historykit.default_pipeline(), window=10_000)
    run.compactions, max(call.sent for call in run.calls)
    ```
"""

from __future__ import annotations

from historykit.demo._command import DEFAULT_DATABASE, main
from historykit.demo._langgraph import run_langgraph
from historykit.demo._pydantic_ai import run_pydantic_ai
from historykit.demo._replay_run import DEFAULT_WINDOW, THREAD_IDS, ReplayRun

__all__ = [
    "DEFAULT_DATABASE",
    "DEFAULT_WINDOW",
    "THREAD_IDS",
    "ReplayRun",
    "main",
    "run_langgraph",
    "run_pydantic_ai",
]
