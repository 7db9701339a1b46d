"""History processors: each takes a neutral history and returns a processed one.

Every processor can be passed where a framework expects a history processor, composed with
`|`, and run with `.run(messages, context_window=...)`.
"""

from historykit.processors.clear_tool_results import ClearToolResults
from historykit.processors.dedupe_file_reads import DedupeFileReads
from historykit.processors.default_pipeline import TRIGGER_PRESETS, TriggerPreset, default_pipeline
from historykit.processors.pairwise_truncate import PairwiseTruncate
from historykit.processors.repair import Repair
from historykit.processors.strip_thinking import StripThinking
from historykit.processors.summarize import Summarize
from historykit.processors.summarizers import ExtractiveSummarizer
from historykit.processors.trigger import Trigger

__all__ = [
    "TRIGGER_PRESETS",
    "ClearToolResults",
    "DedupeFileReads",
    "ExtractiveSummarizer",
    "PairwiseTruncate",
    "Repair",
    "StripThinking",
    "Summarize",
    "Trigger",
    "TriggerPreset",
    "default_pipeline",
]
