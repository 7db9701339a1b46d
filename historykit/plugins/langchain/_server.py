"""A `HistoryKitMiddleware` agent as LangGraph's Agent Server serves it: its private state hidden."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar, get_type_hints

from historykit.errors import ArgumentTypeError

if TYPE_CHECKING:
    from langgraph.pregel import Pregel


G = TypeVar("G", bound="Pregel[Any, Any, Any, Any]")


def private_state_keys() -> frozenset[str]:
    """The state keys `HistoryKitMiddleware` adds to the agent's (`HistoryKitState`): the view last
    sent, the window, the usage level, the recall originals."""
    from langchain.agents import AgentState

    from historykit.plugins.langchain._middleware import HistoryKitState

    return frozenset(get_type_hints(HistoryKitState)) - frozenset(get_type_hints(AgentState))


def hide_private_state(graph: G) -> G:
    """The graph, with historykit's private state keys left out of what it shows: `get_state`,
    the state history, `stream_mode="values"` and the values a run returns, so LangGraph's Agent
    Server (`threads.get_state`, `threads.get_history`, `runs.wait`, a thread's `values`) returns the
    agent's state without them. The keys stay in the graph's channels, and so in every checkpoint:
    the middleware still reads them when a thread is resumed, in any process.

    LangChain marks these keys private (`PrivateStateAttr`), which keeps them out of the agent's
    input and output schemas; LangGraph still shows every channel of the state (the graph's
    `stream_channels`), which this narrows. The graph is copied, not changed.

    Example:
        ```python
        from langchain.agents import create_agent
        from historykit.plugins.langchain import HistoryKitMiddleware, hide_private_state

        # agent.py, named in langgraph.json as {"graphs": {"agent": "./agent.py:agent"}}
        agent = hide_private_state(create_agent(model, tools, middleware=[HistoryKitMiddleware(pipeline)]))
        ```
    """
    from langgraph.pregel import Pregel

    if not isinstance(graph, Pregel):
        raise ArgumentTypeError(
            "hide_private_state expects a compiled LangGraph graph (create_agent's), "
            f"got {type(graph).__name__}"
        )
    private = private_state_keys()
    shown = graph.stream_channels_list
    if not private.intersection(shown):
        return graph
    return graph.copy(update={"stream_channels": [channel for channel in shown if channel not in private]})
