"""The `historykit` command: look at a transcript's tokens, try processors on it, browse stored threads.

```
historykit analyze FILE... [--window N] [--pipeline SPEC] [--json] [--plot out.png] [--from F]
historykit compact FILE [--window N] [--pipeline SPEC] -o OUT [--from F] [--to F] [--json]
historykit threads DB_URL [--json]
historykit show DB_URL THREAD [--json]
historykit export DB_URL THREAD -o FILE [--to F]
historykit doctor DB_URL [--repair] [--json]
```

Transcripts are read in any of the formats of `historykit.formats` (chat: OpenAI chat-completions
messages, one JSON object a line; Pydantic AI JSON, LangChain JSON, Claude Code session logs, Codex
CLI rollouts), detected from the content unless `--from` names one; `--to` names the format written
(`compact` writes the input's format unless told). Without `--window`, a transcript's own window is
used (the one a Codex rollout records, else its model's from genai-prices, else 128,000). `compact`
keeps what an agent's own compaction already dropped (before Claude Code's `compact_boundary`,
Codex's `compacted` row) as it is, and processes what follows. Output that is not a terminal (a
pipe, a file) is laid out for 120 columns (`COLUMNS` wins): tables fold long cells, headings and
notes stay whole lines. `DB_URL` is a SQLAlchemy URL (`sqlite:///agent.db`,
`postgresql+psycopg://user@host/db`) or the path of a SQLite file.

Pipeline SPEC: `default` (what `historykit.default_pipeline()` builds) or processor names separated
by commas, each with optional `:option=value` settings, run in the order given (a `:` starts a new
setting only when `option=` follows it, so values may hold colons:
`summarize:model=openai:gpt-4o-mini`); `Repair` is always
the last step (added when the spec does not end with `repair`). Names: `dedupe`
(DedupeFileReads), `clear` (ClearToolResults), `strip` (StripThinking), `truncate`
(PairwiseTruncate), `summarize` (Summarize), `repair` (Repair). Values are numbers, `true` /
`false`, `none`, text, or lists joined with `+`. Examples: `dedupe,clear,strip,truncate`,
`clear:keep=5:min_gain=2000,truncate:max_fraction=0.7`, `clear:exclude_tools=Read+Grep`.

Exit codes, for scripts: 0 success; 1 runtime failure (a processor, a database connection, a
missing optional dependency); 2 bad input or usage (unreadable, empty, truncated or unknown
transcript, a database of another schema or a newer version, bad options); 3 not found (a file, a
database file, a thread); 4 `doctor` found provider-rule violations it did not repair.
Every error is one line on stderr, `historykit: error: ...`; `--debug` shows the traceback.
"""

from __future__ import annotations

# The command modules register their commands on `app` as they are imported: in this order, which
# is the order `historykit --help` lists them in.
from historykit.cli import _analyze, _compact, _threads, _doctor, _eval  # noqa: F401  isort: skip
from historykit.cli._app import (
    EXIT_FAILURE,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_PROBLEMS,
    EXIT_USAGE,
    CliError,
    app,
    main,
)
from historykit.cli._pipeline_spec import PROCESSOR_NAMES, build_pipeline

__all__ = [
    "EXIT_FAILURE",
    "EXIT_NOT_FOUND",
    "EXIT_OK",
    "EXIT_PROBLEMS",
    "EXIT_USAGE",
    "PROCESSOR_NAMES",
    "CliError",
    "app",
    "build_pipeline",
    "main",
]
