"""A third agent framework, added the way every framework is: one package that registers itself.

`ToyMessage` is the toy framework's native message (a role, a text, tool calls and results, the
tokens its provider reported); `ToyFramework` tells the core what it needs. Nothing in historykit
names it: importing this package is all it takes for `Pipeline.run`, `check`, `TokenCounter`,
`pin`, `summarizer_for` and the transcript formats to handle its histories.
"""

from __future__ import annotations

from tests.plugins.toy_framework._framework import ToyAdapter, ToyFramework, ToyModel
from tests.plugins.toy_framework._messages import ToyMessage

__all__ = ["ToyAdapter", "ToyFramework", "ToyMessage", "ToyModel"]

from historykit._frameworks import register

register(ToyFramework())
