"""A provider emulator for tests: Anthropic Messages, OpenAI Chat Completions and Responses.

See README.md in this directory.
"""

from tests.emulator.emulator import ProviderEmulator, RecordedRequest, extends
from tests.emulator.errors import Rejection
from tests.emulator.models import BINDING_MODELS, NON_BINDING_ANTHROPIC_MODEL, is_binding_model
from tests.emulator.script import EmulatedRequest, Script, ToolCall, Turn, tool_loop

__all__ = [
    "BINDING_MODELS",
    "NON_BINDING_ANTHROPIC_MODEL",
    "EmulatedRequest",
    "ProviderEmulator",
    "RecordedRequest",
    "Rejection",
    "Script",
    "ToolCall",
    "Turn",
    "extends",
    "is_binding_model",
    "tool_loop",
]
