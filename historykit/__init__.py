"""historykit: keep long LLM agent conversations inside the context window without breaking them.

The public names live here; everything else is private to its module.
"""

from historykit.errors import HistoryKitError, UserError
from historykit.gauge import Gauge
from historykit.messages import CompactionMarker, Message
from historykit.pinning import pin
from historykit.pipeline import HistoryProcessor, Pipeline, PipelineResult, ProcessContext, Report, StepNotes
from historykit.processors.default_pipeline import default_pipeline
from historykit.tokens import TokenCount, TokenCounter
from historykit.usage import UsageWarning
from historykit.validity import Violation, check

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
