"""`default_pipeline()`: the recommended composition of the processors, tuned on the corpus.

The cheap, lossless or recoverable edits come first and fire early; the lossy ones come last and
fire late; `Repair` closes every built-in pipeline:

| step | fires at (of the window) | works down to | what it keeps |
|---|---|---|---|
| `ClearMedia` | 8 images | the newest 3 | the final request's and latest user request's images |
| `DedupeFileReads` | 10% | all it can | the latest copy of every file |
| `ClearToolResults` | 10% | 30% of 10%; >= 5% of window; pays its rewrite | last 3 results, final request |
| `StripThinking` | 10% | 60% of 10%; >= 2% of the window | the last assistant turn, the current cycle |
| `Summarize` | 40% | 16%; pays its rewrite or waits | task, last 6 units, pinned content, final request |
| `PairwiseTruncate` | 90% | 60% of 90% | a backstop: fires only when a summary is not enough |
| `Repair` | always | | fixes any provider-rule violation left |

`ClearMedia` changes nothing in a history without images (it returns the very list it was given),
so the figures below, measured on the corpus (text only), are those of the pipeline with it. On a
browser agent's 60-screenshot session it cuts the last request from 8.1 MB to 0.8 MB and the
session's cache-priced input in half (`benchmarks/bench_media.py`). It is in every preset: images
are resent on every call whatever the fill of the window.

Why these numbers: `benchmarks/bench_replay.py` replays the 18 corpus sessions (1,252 model calls)
call by call and prices each call's input as a provider prompt cache does (previous prefix 0.1, the
rest 1.25, summarizer input 1.0, as if an LLM wrote the summaries); the target is the cheapest
anchor configuration, pydantic-ai-harness `ClearToolResults(clear_tool_inputs=True)` (3,189,468 at
32,000 tokens, persistent; 4,348,547 at 100,000, view-only). Small inputs are what make a session
cheap, so the marks are low; what keeps early edits from costing more than they save is that each
pays for its rewrite: a clearing frees at least the tokens it makes the cache write again, from its
first edit to the end (`ClearToolResults.rewrite_ratio=1.0`), and a summary that would not, because
the call is over the mark mostly by what just arrived (a large file read, a test run: a final
request larger than what the summary would free, which the call must keep verbatim), waits
(`Summarize.rewrite_ratio=1.0`). Written anyway, such a summary shortens little and the next call,
over the mark again, writes another (46 summaries, several at consecutive calls; 2,413,148 at
32,000 tokens); waiting a call or two lets one summary cover what arrived too: 37 summaries,
2,379,802 (1.4% less), and no call truncated that was not before. A summary that does not pay for
another reason is written at once (waiting would not make it pay sooner, and the cheap edits in the
meantime would break the cache at consecutive calls; waiting for any summary that does not pay
costs 2,375,085), and none waits past the truncation backstop's mark (or the warn mark, when lower:
`wait_limit`), so nothing is truncated that a summary could keep. With a ratio of 0.5 the summaries
cost 0.3% more (39 summaries; 2 costs the same); at 100,000 tokens, where the sessions summarize
twice, the rule changes nothing.

The sweep below was measured with the first form of the summary rule (every summary that did not
pay waited: 2,375,085 / 3,019,490), within 0.3% of the rule kept. With both rules: clearing without
its rule trickles (2.45M at 32,000 tokens, against 2.38M; at 100,000 it costs 0.6% less); a
clearing ratio of 0.5 or 2 costs 1.9% / 2.9% more at 32,000 (at 100,000, 0.5 costs 1.0% less and 2
costs 3.7% more). The cheap edits' mark costs less the lower it is (0.3 / 0.25 / 0.2 / 0.15 / 0.1
of the window: 2.45M / 2.41M / 2.38M / 2.38M / 2.38M at 32,000, 3.51M / 3.35M / 3.21M / 3.11M /
3.02M at 100,000). Summarizing at 40% of the window, down to 40% of that mark: at 50% the inputs
stay bigger (2.49M), at 30% the summarizer runs 52 times instead of 35 for 2.2% less (at 35%: 46
times, 1.1% less), each summary losing detail that clearing keeps recoverable; down to 50% / 60% of
the mark costs 1.1% / 2.0% more, down to 30% 0.7% less with a shorter tail kept verbatim (the
quality probes, `benchmarks/bench_quality.py` with recall, now hold there at 32,000 tokens; before
summaries paid for their rewrite they fell under 95% at 30 calls of one session). When the trigger
fires but no summary is worth writing, `Summarize` leaves the history alone
(`truncate_instead=False`; truncating instead no longer changes the corpus's cost) rather than drop
whole messages (the user's among them) at 40% of the window, which has room for them; the backstop
at 90% truncates. Keeping the last 3 results, as the anchors and Anthropic's own context editing
do, is a choice for the model's sake (2 would cost 3.7% less).

Measured with these settings, as if every session ran on a model that binds thinking (2026-11-27):
2,379,802 at 32,000 tokens (0.746x the cheapest anchor, target 0.75x; 37 summaries) and 3,021,387
at 100,000 (0.695x the cheapest anchor, 0.644x the same anchor persistent; 2 summaries); view-only
mode sends the very same views (the same cost); no call is over the window, none drops the newest
message, none replays thinking after an edit. In one call the final request alone is over 32,000
tokens (six parallel file reads, 35,248 tokens): `PairwiseTruncate`'s last resort cuts the middle
of its largest results, with a note. The input served from the previous call's prefix is 86.6% at
32,000 and 93.6% at 100,000 tokens: small inputs cost less but leave the new messages a larger
share (the 920,133 tokens that arrive between calls alone make any 95%-cached replay cost at least
2.90M at 32,000). Details and commands: `benchmarks/README.md`.

Presets (`preset=`, `TRIGGER_PRESETS`) move the marks, keeping the order of the stages:

| preset | cheap edits | summary | truncation backstop | warns at |
|---|---|---|---|---|
| `"default"` | 10% | 40% | 90% | 90% |
| `"cline"` | `max(window − 40k, 0.8 · window)` | the same mark | the same mark | over the window |
| `"chainreview"` | 60% | 80% | 95% | 90% |

Example:
    ```python
    import historykit

    pipeline = historykit.default_pipeline()                          # budgets follow the run's window
    pipeline = historykit.default_pipeline(preset="chainreview")      # 60% / 80% / warn at 90%
    pipeline = historykit.default_pipeline(context_window=32_000)     # budgets fixed for a 32k model
    pipeline = historykit.default_pipeline(model="openai:gpt-4o-mini")  # an LLM writes the summaries
    result = pipeline.run(messages, context_window=200_000)
    ```
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from typing import Any

from historykit._pipeline import Pipeline, Report
from historykit._usage import UsageWarning
from historykit._validate import check_fraction, check_instance, check_int
from historykit.errors import InvalidArgumentError
from historykit.processors._clear_media import ClearMedia
from historykit.processors._clear_tool_results import ClearToolResults
from historykit.processors._dedupe_file_reads import DedupeFileReads
from historykit.processors._pairwise_truncate import PairwiseTruncate
from historykit.processors._repair import Repair
from historykit.processors._strip_thinking import StripThinking
from historykit.processors._summarize import Summarize
from historykit.processors._summarizers import Summarizer
from historykit.processors._trigger import Trigger

KEEP_IMAGES = 3
"""Images `ClearMedia` always leaves in the request (up to 4 more until the next batch goes)."""
EDIT_AT = 0.1
"""High-water mark of the cheap edits (dedupe, clear, strip), as a fraction of the window."""
CLEAR_DOWN_TO = 0.3
"""Clearing goes down to this fraction of its high-water mark."""
STRIP_DOWN_TO = 0.6
"""Stripping thinking goes down to this fraction of its high-water mark."""
CLEAR_MIN_GAIN = 0.05
"""Clearing frees at least this fraction of the window at once."""
STRIP_MIN_GAIN = 0.02
"""Stripping frees at least this fraction of the window at once."""
KEEP_RESULTS = 3
"""The last tool results that are never cleared."""
SUMMARIZE_AT = 0.4
"""High-water mark of `Summarize`, as a fraction of the window."""
SUMMARIZE_DOWN_TO = 0.4
"""A summary brings the history down to this fraction of `SUMMARIZE_AT`."""
SUMMARIZE_REWRITE_RATIO = 1.0
"""A summary frees at least this many times what it makes the cache write again, or waits (until
the truncation backstop's mark or the warn mark, the lower: `wait_limit`)."""
KEEP_LAST = 6
"""Units (a tool call with its results is one) that `Summarize` keeps verbatim."""
TRUNCATE_AT = 0.9
"""High-water mark of the `PairwiseTruncate` backstop, as a fraction of the window."""
WARN_AT = 0.9
"""What a call sends warns from this fraction of the window: past the backstop's mark, a call the
pipeline could not bring down."""


@dataclass(frozen=True)
class TriggerPreset:
    """Where each stage of `historykit.default_pipeline()` starts, and where usage warns.

    Pass one, or the name of a built-in one (`TRIGGER_PRESETS`), as `default_pipeline(preset=...)`.
    Each stage runs only on what the stages before it left, so a later stage fires only when the
    earlier ones did not free enough.

    Example:
        ```python
        import historykit
        from historykit.processors import Trigger, TriggerPreset

        historykit.default_pipeline(preset="cline")
        historykit.default_pipeline(preset=TriggerPreset(
            edit=Trigger(max_fraction=0.5, low_water=0.3),
            summarize=Trigger(reserve=30_000, low_water=0.6),
            truncate=Trigger(reserve=10_000),
            warn_at=0.85,
        ))
        ```
    """

    edit: Trigger
    """When the cheap, recoverable edits start (`DedupeFileReads`, `ClearToolResults`,
    `StripThinking`), and how far down `ClearToolResults` clears (its `low_water`); deduplication
    does all it can, stripping goes down to `STRIP_DOWN_TO` of the mark."""
    summarize: Trigger
    """When `Summarize` starts, and how far down a summary brings the history."""
    truncate: Trigger
    """The `PairwiseTruncate` backstop: it fires only when a summary was not enough."""
    warn_at: float | None = None
    """Warn when what a call sends crosses this fraction of the window (`Report.warnings`, the
    `historykit` logger); `None`: warn only when a call is left over the window."""

    def __post_init__(self) -> None:
        for name in ("edit", "summarize", "truncate"):
            check_instance(name, getattr(self, name), Trigger, "a historykit Trigger")
        check_fraction("warn_at", self.warn_at, what="a fraction in (0, 1]", optional=True)


TRIGGER_PRESETS: dict[str, TriggerPreset] = {
    # Tuned on the corpus (the module documentation says why each number).
    "default": TriggerPreset(
        edit=Trigger(max_fraction=EDIT_AT, low_water=CLEAR_DOWN_TO),
        summarize=Trigger(max_fraction=SUMMARIZE_AT, low_water=SUMMARIZE_DOWN_TO),
        truncate=Trigger(max_fraction=TRUNCATE_AT, low_water=0.6),
        warn_at=WARN_AT,
    ),
    # Cline: one mark, max(window − 40k, 0.8 · window); everything happens there, cheapest first.
    "cline": TriggerPreset(
        edit=Trigger.cline(low_water=0.3),
        summarize=Trigger.cline(),
        truncate=Trigger.cline(),
        warn_at=None,
    ),
    # ChainReview: shorten tool outputs at 60%, condense at 80%, warn at 90%. It has no backstop of
    # its own: truncation waits until 95%, so the warning band (90-95%) is reachable; clearing goes
    # as far down as the default's (tuned on the corpus).
    "chainreview": TriggerPreset(
        edit=Trigger(max_fraction=0.6, low_water=0.3),
        summarize=Trigger(max_fraction=0.8, low_water=0.6),
        truncate=Trigger(max_fraction=0.95, low_water=0.6),
        warn_at=0.9,
    ),
}
"""The built-in presets by name, for `default_pipeline(preset=name)`."""


def _preset(preset: str | TriggerPreset) -> TriggerPreset:
    if isinstance(preset, TriggerPreset):
        return preset
    if isinstance(preset, str) and preset in TRIGGER_PRESETS:
        return TRIGGER_PRESETS[preset]
    raise InvalidArgumentError(
        f"preset must be a TriggerPreset or one of {', '.join(map(repr, TRIGGER_PRESETS))}, got {preset!r}"
    )


def _wait_limit(marks: TriggerPreset) -> Trigger:
    """Where a summary that does not pay for its cache rewrite stops waiting: the truncation
    backstop's mark, so that nothing is truncated that a summary could keep, or the warn mark when
    it is lower, since a warning says the pipeline could not bring the call down."""
    truncate = marks.truncate
    if marks.warn_at is None:
        return truncate
    if truncate.max_fraction is not None and truncate.max_fraction <= marks.warn_at:
        return truncate
    return replace(truncate, max_fraction=marks.warn_at)


def default_pipeline(
    *,
    context_window: int | None = None,
    summarizer: Summarizer | None = None,
    model: Any = None,
    root: str | None = None,
    exclude_tools: Collection[str] = (),
    on_report: Callable[[Report], None] | None = None,
    preset: str | TriggerPreset = "default",
    on_warning: Callable[[UsageWarning], None] | None = None,
) -> Pipeline:
    """The recommended pipeline: the six processors, cheapest first, then `Repair`.

    - `context_window`: the model's window in tokens. Given, every budget is fixed in tokens from
      it; left out, budgets follow the window each run reports (given to `run`, taken from the
      framework's model, or the default).
    - `summarizer` or `model`: what writes the summaries (see `Summarize`); neither: the
      extractive summarizer, no LLM.
    - `root`: the agent's working directory, so `DedupeFileReads` knows `/repo/a.py` is `a.py`.
    - `exclude_tools`: tools whose results and arguments are never cleared.
    - `on_report`: called with every run's report.
    - `preset`: where each stage starts and where usage warns: a `TriggerPreset`, or the name of
      one in `TRIGGER_PRESETS` (`"default"`, `"cline"`, `"chainreview"`).
    - `on_warning`: called with each usage warning (`historykit.UsageWarning`), once per crossing.

    Raises `ValueError` for a `context_window` that is not a positive int, an unknown preset, or
    when both `summarizer` and `model` are given.
    """
    check_int("context_window", context_window, minimum=1, optional=True)
    marks = _preset(preset)

    def budget(trigger: Trigger) -> Trigger:
        return trigger if context_window is None else trigger.fixed(context_window)

    def gain(fraction: float) -> int | None:
        # None lets the processor take the same fraction of the run's window itself.
        return None if context_window is None else int(context_window * fraction)

    edit = budget(marks.edit)
    return Pipeline(
        [
            ClearMedia(keep=KEEP_IMAGES),
            DedupeFileReads(root=root, trigger=replace(edit, low_water=1.0)),
            ClearToolResults(
                keep=KEEP_RESULTS,
                exclude_tools=exclude_tools,
                trigger=edit,
                min_gain=gain(CLEAR_MIN_GAIN),
            ),
            StripThinking(
                keep_turns=1, trigger=replace(edit, low_water=STRIP_DOWN_TO), min_gain=gain(STRIP_MIN_GAIN)
            ),
            Summarize(
                trigger=budget(marks.summarize),
                keep_last=KEEP_LAST,
                summarizer=summarizer,
                model=model,
                rewrite_ratio=SUMMARIZE_REWRITE_RATIO,
                wait_limit=budget(_wait_limit(marks)),
            ),
            PairwiseTruncate(trigger=budget(marks.truncate)),
            Repair(),
        ],
        on_report=on_report,
        warn_at=marks.warn_at,
        on_warning=on_warning,
    )
