"""historykit: keep long LLM agent conversations inside the context window without breaking them.

The public names live here; everything else is private to its module.
"""

from historykit._gauge import Gauge
from historykit._messages import CompactionMarker, Message
from historykit._pinning import pin
from historykit._pipeline import HistoryProcessor, Pipeline, PipelineResult, ProcessContext, Report, StepNotes
from historykit._tokens import TokenCount, TokenCounter
from historykit._usage import UsageWarning
from historykit._validity import Violation, check
from historykit.errors import HistoryKitError, UserError
from historykit.processors._default_pipeline import default_pipeline

__all__ = [
    "CompactionMarker",
    "Gauge",
    "HistoryKitError",
    "HistoryProcessor",
    "Message",
    "Pipeline",
    "PipelineResult",
    "ProcessContext",
    "Report",
    "StepNotes",
    "TokenCount",
    "TokenCounter",
    "UsageWarning",
    "UserError",
    "Violation",
    "check",
    "default_pipeline",
    "pin",
]

__version__ = "0.1.0"
