"""historykit: keep long LLM agent conversations inside the context window without breaking them.

The everyday names live here: the neutral messages and their parts, the pipeline and its report,
token counting, the checks, pinning, recall and the gauge. The processors are in
`historykit.processors`, the stores in `historykit.checkpointers`, the framework integrations in
`historykit.plugins`, transcript files in `historykit.formats`, the errors in `historykit.errors`.
Every other module is private (`_`-prefixed); its public names are re-exported by a package.
"""

from historykit._binding import BINDING_MODELS
from historykit._gauge import Gauge
from historykit._hooks import AdjustCompaction, AfterCompaction, BeforeCompaction
from historykit._messages import (
    CompactionMarker,
    MediaPart,
    Message,
    OtherPart,
    Part,
    PartKind,
    ProviderCompaction,
    ReportedUsage,
    Role,
    SummaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from historykit._pinning import pin
from historykit._pipeline import (
    HistoryProcessor,
    Pipeline,
    PipelineResult,
    ProcessContext,
    Report,
    StepNotes,
    StepReport,
)
from historykit._recall import Recall
from historykit._tokens import TokenCount, TokenCounter, Tokenizer
from historykit._usage import UsageWarning, WarningKind
from historykit._validity import RULES, Violation, check
from historykit.errors import HistoryKitError, UserError
from historykit.processors._default_pipeline import default_pipeline

__all__ = [
    "BINDING_MODELS",
    "RULES",
    "AdjustCompaction",
    "AfterCompaction",
    "BeforeCompaction",
    "CompactionMarker",
    "Gauge",
    "HistoryKitError",
    "HistoryProcessor",
    "MediaPart",
    "Message",
    "OtherPart",
    "Part",
    "PartKind",
    "Pipeline",
    "PipelineResult",
    "ProcessContext",
    "ProviderCompaction",
    "Recall",
    "Report",
    "ReportedUsage",
    "Role",
    "StepNotes",
    "StepReport",
    "SummaryPart",
    "TextPart",
    "ThinkingPart",
    "TokenCount",
    "TokenCounter",
    "Tokenizer",
    "ToolCallPart",
    "ToolResultPart",
    "UsageWarning",
    "UserError",
    "Violation",
    "WarningKind",
    "check",
    "default_pipeline",
    "pin",
]

__version__ = "0.1.0"
