"""`SQLModelSaver` as the checkpointer of LangGraph's Agent Server (`langgraph dev`, langgraph-api).

The server takes a custom checkpointer from `langgraph.json`'s `checkpointer.path`: an object it
calls, and whose result it enters as an async context manager, once per thread of the server
that needs a checkpointer (each gets a saver of its own; the server closes it on shutdown).
`checkpointer`, the default `AgentServerCheckpointer`, is such an object: name it by its module
path and set the database in the server's environment (`HISTORYKIT_CHECKPOINTER_URL`), or build
one in a file of your own and name that file.

Example:
    ```json
    {
      "dependencies": ["."],
      "graphs": {"agent": "./agent.py:agent"},
      "checkpointer": {"path": "historykit.checkpointers.agent_server.checkpointer"},
      "env": {"HISTORYKIT_CHECKPOINTER_URL": "postgresql+psycopg://user@db-host/agents"}
    }
    ```

    or `"checkpointer": {"path": "./checkpointer.py:make"}` with, in `checkpointer.py`:

    ```python
    from historykit.checkpointers._agent_server import AgentServerCheckpointer

    make = AgentServerCheckpointer(url="sqlite:///agents.db", single_writer=True)
    ```
"""

from historykit.checkpointers._agent_server import (
    DEFAULT_URL,
    URL_VARIABLE,
    AgentServerCheckpointer,
    checkpointer,
)

__all__ = [
    "DEFAULT_URL",
    "URL_VARIABLE",
    "AgentServerCheckpointer",
    "checkpointer",
]
