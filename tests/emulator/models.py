"""Which emulated models bind thinking to its prefix, and how large each model's window is.

The one list of binding model names for the tests: import `BINDING_MODELS` / `is_binding_model`
rather than repeating names.
"""

from __future__ import annotations

BINDING_MODELS: tuple[str, ...] = (
    "claude-fable-5-1",
    "claude-fable-5-2",
    "claude-mythos-5-2",
    "claude-opus-5-5",
    "claude-sonnet-5-5",
    "claude-haiku-5-5",
)
"""Model-id prefixes that run the prefix check on replayed thinking (PROVIDER-RULES R13): Claude Fable 5.1
and 5.2, Mythos 5.2, Opus 5.5, Sonnet 5.5, Haiku 5.5. A dated id (`claude-opus-5-5-20261001`) matches its
prefix. Claude Mythos 5.1 records the binding but does not check it, so it is not here."""

NON_BINDING_ANTHROPIC_MODEL = "claude-sonnet-4-6"
"""A thinking model that checks signatures (R7/R8) but not prefixes, for the non-binding side of tests."""

DEFAULT_CONTEXT_WINDOW = 200_000
"""Window of a model absent from the emulator's `context_windows` mapping."""


def is_binding_model(model: str) -> bool:
    """Whether `model` binds each replayed thinking block to the prefix it was produced under."""
    return model.startswith(BINDING_MODELS)
