"""History processors: each takes a neutral history and returns a processed one.

Every processor can be passed where a framework expects a history processor, composed with
`|`, and run with `.run(messages, context_window=...)`.
"""

from historykit.processors._clear_media import ClearMedia
from historykit.processors._clear_tool_results import ClearToolResults
from historykit.processors._dedupe_file_reads import DedupeFileReads
from historykit.processors._default_pipeline import TRIGGER_PRESETS, TriggerPreset, default_pipeline
from historykit.processors._file_reads import FileRead, FileWrite
from historykit.processors._offload_tool_outputs import OffloadToolOutputs
from historykit.processors._pairwise_truncate import PairwiseTruncate
from historykit.processors._repair import Repair
from historykit.processors._strip_thinking import StripThinking
from historykit.processors._summarize import Summarize
from historykit.processors._summarizers import ExtractiveSummarizer, NativeSummary, UnusableSummarizerError
from historykit.processors._trigger import Trigger

__all__ = [
    "TRIGGER_PRESETS",
    "ClearMedia",
    "ClearToolResults",
    "DedupeFileReads",
    "ExtractiveSummarizer",
    "FileRead",
    "FileWrite",
    "NativeSummary",
    "OffloadToolOutputs",
    "PairwiseTruncate",
    "Repair",
    "StripThinking",
    "Summarize",
    "Trigger",
    "TriggerPreset",
    "UnusableSummarizerError",
    "default_pipeline",
]
