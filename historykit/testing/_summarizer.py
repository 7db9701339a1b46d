"""A summarizer for tests: no model, and a record of every call."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from historykit._messages import Message
from historykit.processors._summarizers import ExtractiveSummarizer


@dataclass
class CountingSummarizer:
    """A summarizer that writes the extractive summary (no LLM) and records what it was asked.

    Give it to `Summarize(summarizer=...)` or `default_pipeline(summarizer=...)` to see how often
    the pipeline summarizes, and what: `calls` holds the messages of each call, `focuses` the focus
    of each (`None` unless a manual compaction gave one).

    Example:
        ```python
        import historykit
        from historykit.testing import CountingSummarizer, Recording

        summarizer = CountingSummarizer()
        pipeline = historykit.default_pipeline(summarizer=summarizer)
        pipeline.run(Recording.load().messages, context_window=10_000)
        assert len(summarizer.calls) >= 1
        ```
    """

    model_name: str = "counting-summarizer"
    """The name the pipeline's reports and logs give the summarizer."""
    calls: list[list[Message]] = field(default_factory=list)
    """The messages of every call, in order."""
    focuses: list[str | None] = field(default_factory=list)
    """The focus of every call, in order."""
    _inner: ExtractiveSummarizer = field(default_factory=ExtractiveSummarizer, init=False, repr=False)

    def __call__(self, messages: Sequence[Message], focus: str | None = None) -> str:
        """Record the call, and answer with `ExtractiveSummarizer`'s summary of `messages`."""
        self.calls.append(list(messages))
        self.focuses.append(focus)
        return self._inner(messages, focus)
