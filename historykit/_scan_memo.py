"""What a step learnt about a conversation's history on its latest call, reused on the next one.

An agent's next call sends the history it kept plus what is new (a response, its tool results): a
step that looks at each message again pays for the whole history on every call. `MessageFacts`
keeps one fact per message of the latest call (a copy without thinking, a shape, a count) and, on
the next call, takes the facts of the leading messages that are the very same objects at the same
positions from there, in one C-level comparison, and computes only the rest: an edited message is
a new object, so its fact (and every one after it) is computed again.

A memo belongs to one conversation: a step asks for it with
`ctx.conversation.memory(self, ...)` (`historykit._conversations`), so nothing learnt about one
conversation is read by another's call; a call that names no conversation gets a state of its own,
and a memo that starts empty. It is an accelerator only: a fact is a function of its message (the
memo holds the messages it describes, so their ids cannot be reused), and a memo that is empty or
forgotten gives the same answers, computed again.

Example:
    ```python
    facts = ctx.conversation.memory(self, MessageFacts).of(messages, self._stripped)
    ```
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from itertools import compress, count
from typing import Any, Generic, TypeVar

_T = TypeVar("_T")
_D = TypeVar("_D")


def common_prefix(old: Sequence[object], new: Sequence[object]) -> int:
    """How many leading items of `new` are the very objects of `old`, at the same positions."""
    if all(map(operator.is_, old, new)):  # stops at the shorter one
        return min(len(old), len(new))
    return next(compress(count(), map(operator.is_not, old, new)))


class MessageFacts(Generic[_T]):
    """One fact per message of the latest history it was asked about (see the module documentation).

    Example:
        ```python
        memo: MessageFacts[int] = MessageFacts()
        counts = memo.of(messages, counter.count_message)   # computed
        counts = memo.of([*messages, new], counter.count_message)   # only `new` counted
        ```
    """

    __slots__ = ("_derived", "_seen")

    def __init__(self) -> None:
        # One tuple, replaced whole: a call of the same conversation on another thread reads either
        # the old state or the new one, never half of each.
        self._seen: tuple[object, tuple[object, ...], tuple[_T, ...]] = (None, (), ())
        self._derived: tuple[object, object] = (None, None)

    def of(self, messages: Sequence[Any], fact: Callable[[Any], _T], basis: object = None) -> tuple[_T, ...]:
        """`fact(m)` for each of `messages`, in order: remembered for the leading messages that are
        the very objects of the latest call's, computed for the others. `basis`: what else the facts
        depend on (the token counter of counts), compared by identity: another one computes all."""
        held, old, facts = self._seen
        same = common_prefix(old, messages) if held is basis else 0
        if same == len(messages) == len(old):
            return facts
        out = facts[:same] + tuple(map(fact, messages[same:]))
        self._seen = (basis, tuple(messages), out)
        return out

    def derived(self, facts: tuple[_T, ...], make: Callable[[tuple[_T, ...]], _D]) -> _D:
        """`make(facts)` for the facts `of` returned, remembered while they are the latest: a call
        that finds every fact remembered finds what was made of them too."""
        held, value = self._derived
        if held is facts:
            return value  # type: ignore[return-value]
        value = make(facts)
        self._derived = (facts, value)
        return value

    def clear(self) -> None:
        """Forget everything (the next call computes every fact)."""
        self._seen = (None, (), ())
        self._derived = (None, None)
