"""Where a transcript's tokens go, and what a pipeline would save on it, call by call.

`analyze(messages, window=...)` looks at a neutral history (any transcript format reads into one:
`historykit.formats.read_transcript`) and reports:

- the estimated tokens by kind (system, user, assistant text, thinking, tool calls, tool results)
  and by tool (results and call arguments separately);
- the largest tool outputs, and the files read more than once (recognised as
  `DedupeFileReads` recognises them);
- a **replay**: the session is replayed model call by model call under the context window, as the
  agent would have run with the pipeline in persistent mode. Call `t` sees every message before the
  `t`-th assistant message; its input is the processed history of call `t - 1` plus the messages
  that came since, run through the pipeline. The replay gives the context size of each call before
  (the raw history) and after processing, the share of each input that repeats the previous call's
  input from its start (what a provider's prompt cache reuses), and per processor how often it
  acted and how many tokens it freed when it did.

What the transcript itself records is used: the usage the provider reported for each call (Claude
Code's `message.usage`, Codex's token-count events; `Message.usage`) is shown next to the replayed
sizes, and anchors them, as `TokenCounter.count` anchors every count: the recorded input and output
of the call before stand for everything up to its answer (the system prompt and the tool definitions
a transcript does not hold included), and only the messages since are estimated. The window is the
transcript's unless given (the one a Codex rollout records, else its model's from genai-prices, else
the default). The agent's own compactions (`boundaries`: Claude Code's compact boundary, Codex's
`compacted` row; `historykit.formats.compaction_boundaries`) start a new context in the replay, as
they did in the real run. What the calls sent that the transcript does not hold is named
(`Replay.unseen`), never guessed.

The command `historykit analyze` prints this; in Jupyter an `Analysis` renders as HTML tables, and
`Analysis.plot()` draws the context size per call before and after.

Example:
    ```python
    import historykit
    from historykit.analysis import analyze
    from historykit.formats import read_transcript

    transcript = read_transcript("session.jsonl")
    analysis = analyze(  # under the transcript's own window
        transcript.messages, pipeline=historykit.default_pipeline(), name=transcript.path.name
    )
    analysis.repeated_reads                                      # files read more than once
    analysis.replay.sent_after / analysis.replay.sent_before    # share of input tokens still sent
    analysis.to_dict()                                           # JSON-ready
    ```
"""

from historykit.analysis._analysis import (
    KIND_LABELS,
    Analysis,
    CallSize,
    ProcessorSavings,
    RepeatedRead,
    Replay,
    ToolOutput,
    analyze,
    replay,
)

__all__ = [
    "KIND_LABELS",
    "Analysis",
    "CallSize",
    "ProcessorSavings",
    "RepeatedRead",
    "Replay",
    "ToolOutput",
    "analyze",
    "replay",
]
