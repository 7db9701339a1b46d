"""What a conversation keeps across model calls, found by that conversation's key and by nothing else.

One pipeline (or `HistoryKit`, or `HistoryKitMiddleware`) usually serves many conversations at once:
a web app builds it at import time and every user's requests go through it. Whatever outlives one
call therefore belongs to one conversation and is found by that conversation's key:

- the views a view-only replay derived (`historykit._view.ViewReplay`);
- what a processor remembers between calls (`Summarize`: its summaries and background summaries),
  asked for with `ConversationState.memory(processor, make)`; among it what the steps learnt of the
  latest history (`historykit._scan_memo`), so the next call looks only at what is new;
- the originals of the tool outputs a placeholder replaced, for the recall tool (`historykit.Recall`);
- the usage-warning level (`historykit.UsageWarning`) and the window an overflow shrank the conversation to.

The integrations know the key: Pydantic AI's `conversation_id` (`("pydantic-ai", conversation_id)`),
LangGraph's thread id (any type, as its checkpointers read it: `str(thread_id)`) with the graph's
checkpoint namespace (`("langgraph", thread, namespace)`), and an explicit `conversation=` for
direct `Pipeline.run` callers. A call with no key gets a state of its own that nothing else sees:
no key, nothing shared across calls.

This state only makes calls faster or carries what a conversation asked for; a conversation's view
is a function of its messages, its stored markers and the configuration, so a process that starts
with none rebuilds the same view.

Caches keyed by the identity of an object (the adapters' conversions, token counts, a processor's
verdict on a message) are not conversation state: a hit needs the very object, and what is cached
is derived from that object alone (and from the other objects its entry names, checked by
identity), so it can hand no conversation another's content.

Example:
    ```python
    from historykit import Pipeline

    pipeline = Pipeline(processors)
    pipeline.run(history, 128_000, mode="view", conversation="user-42")   # replays only what is new
    state = pipeline.conversations.get("user-42")
    ```
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from historykit._identity_cache import DEFAULT_CACHE_POLICY, CachePolicy
from historykit._view import ViewReplay

_T = TypeVar("_T")


def conversation_key(kind: str, *parts: object) -> tuple[object, ...] | None:
    """The key of a conversation an integration names: `(kind, *parts)`, or `None` when the first
    part is `None` (the framework names no conversation for this call).

    The kind keeps two frameworks' conversations apart when one pipeline serves both (a Pydantic AI
    conversation `"t1"` is not LangGraph's thread `"t1"`)."""
    if not parts or parts[0] is None:
        return None
    return (kind, *parts)


class ConversationState:
    """Everything one conversation keeps across calls (see the module documentation).

    Example:
        ```python
        state = pipeline.conversations.get("user-42")
        memory = state.memory(summarize, dict)     # what a processor keeps for this conversation
        ```
    """

    def __init__(
        self, key: Hashable | None, cache_policy: CachePolicy = DEFAULT_CACHE_POLICY, *, lasting: bool = True
    ) -> None:
        self.key = key
        """The conversation's key; `None` for the state of a call that named no conversation."""
        self.lasting = lasting
        """`False` for the state of one call that named no conversation, dropped when the call ends:
        nothing is started for a later call (a background summary) that would never see it."""
        self.views = ViewReplay(cache_policy=cache_policy)
        """The views this conversation's view-only calls derived (`historykit._view`)."""
        self.originals: OrderedDict[str, str] = OrderedDict()
        """Tool outputs a placeholder of this conversation replaced, by recall handle
        (`historykit.Recall`)."""
        self.usage_level = 0
        """The usage-warning level of the latest call (`historykit.UsageWarning`)."""
        self.window: int | None = None
        """The window a context overflow shrank this conversation to (`historykit.plugins._overflow`)."""
        self.sent: object = None
        """What the integration last put in the framework's state for this conversation (the
        LangChain middleware: the view list), so it can tell its own from a resumed one."""
        self.lock = threading.RLock()
        """Held while a call updates this state from several threads at once (a double submit)."""
        self._memory: dict[int, tuple[object, Any]] = {}

    def memory(self, owner: object, make: Callable[[], _T]) -> _T:
        """What `owner` (a processor) keeps for this conversation, made by `make()` on first use."""
        with self.lock:
            entry = self._memory.get(id(owner))
            if entry is None or entry[0] is not owner:
                entry = self._memory[id(owner)] = (owner, make())
            return entry[1]  # type: ignore[no-any-return]

    def keep_original(self, handle: str, content: str, limit: int) -> None:
        """Remember the tool output `handle` names (at most `limit` of them, the oldest go first)."""
        with self.lock:
            self.originals[handle] = content
            self.originals.move_to_end(handle)
            while len(self.originals) > limit:
                self.originals.popitem(last=False)

    def __repr__(self) -> str:
        return f"ConversationState({self.key!r})"


class Conversations:
    """The state of each conversation a pipeline serves, by key; the least recently used are
    forgotten first beyond `CachePolicy.max_conversations`.

    Example:
        ```python
        state = pipeline.conversations.get(("pydantic-ai", "0195..."))
        pipeline.conversations.forget("user-42")     # a conversation that ended
        ```
    """

    def __init__(self, cache_policy: CachePolicy = DEFAULT_CACHE_POLICY) -> None:
        self.cache_policy = cache_policy
        """Bounds how many conversations are kept, and each conversation's caches."""
        self._states: OrderedDict[Hashable, ConversationState] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable | None) -> ConversationState:
        """The state of conversation `key`; for `None`, a new state that no other call sees."""
        if key is None:
            return ConversationState(None, self.cache_policy, lasting=False)
        with self._lock:
            state = self._states.get(key)
            if state is None:
                state = self._states[key] = ConversationState(key, self.cache_policy)
                while len(self._states) > self.cache_policy.max_conversations:
                    self._states.popitem(last=False)
            else:
                self._states.move_to_end(key)
            return state

    def forget(self, key: Hashable) -> None:
        """Drop what conversation `key` kept (the next call starts over, as a new process would)."""
        with self._lock:
            self._states.pop(key, None)

    def __contains__(self, key: object) -> bool:
        return key in self._states

    def __len__(self) -> int:
        return len(self._states)
