"""History processors: each takes a neutral history and returns a processed one.

Every processor can be passed where a framework expects a history processor, composed with
`|`, and run with `.run(messages, context_window=...)`.
"""

from historykit.processors.repair import Repair

__all__ = ["Repair"]
