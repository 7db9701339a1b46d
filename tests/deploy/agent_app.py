"""The agent the deployment tests serve: `create_agent` with `HistoryKitMiddleware`, a scripted chat
model and a file-reading tool, the way a user writes the module langgraph.json names.

Each user prompt asks the model to read one file (`read src/x.py (call_id)`); the model calls the
tool, then answers with a digest of everything it was sent, so a request that differs anywhere
changes every later one. Every request the model gets is appended to the JSON-lines file named by
`HISTORYKIT_DEPLOY_CALLS` (one line per call, from any process: the server's, a worker's, the
test's own reference run), with the thread's label taken from the prompt (`[t3] ...`).

`HISTORYKIT_DEPLOY_PERSIST=1` runs the middleware in persistent mode; the default is view-only.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

from historykit import default_pipeline
from historykit.plugins.langchain import HistoryKitMiddleware, hide_private_state

WINDOW = 2_500
"""The model's context window: small, so a thread compacts on every turn from its third on."""

CALLS_VARIABLE = "HISTORYKIT_DEPLOY_CALLS"
PERSIST_VARIABLE = "HISTORYKIT_DEPLOY_PERSIST"

_PROMPT = re.compile(r"^\[(?P<label>[^\]]+)\] turn (?P<turn>\d+): read (?P<path>\S+) \((?P<call>[^)]+)\)$")


def prompt(label: str, turn: int) -> str:
    """The user prompt of a thread's turn: the thread's label, the file and the tool call id to use."""
    return f"[{label}] turn {turn}: read src/module_{turn % 7}.py ({label}_call_{turn})"


@tool
def read_file(path: str) -> str:
    """Read a source file."""
    return f"{path}:\n" + "\n".join(f"{n:3} def function_{n}(x): return x * {n}  # {path}" for n in range(30))


def wire(message: BaseMessage) -> list[Any]:
    """What the model is sent of a message: its kind, text and tool calls (not LangChain's run ids,
    which are new in every process)."""
    calls = [[c["name"], c["args"], c["id"]] for c in getattr(message, "tool_calls", None) or []]
    extra = [message.tool_call_id] if isinstance(message, ToolMessage) else []
    return [message.type, message.content, calls, *extra]


class ScriptedModel(BaseChatModel):
    """Reads the file the last prompt names, then answers with a digest of its request; records
    every request (`HISTORYKIT_DEPLOY_CALLS`)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self

    @property
    def _llm_type(self) -> str:
        return "historykit-deploy-scripted"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        request = [wire(m) for m in messages]
        prompts = [m for m in messages if isinstance(m, HumanMessage) and _PROMPT.match(str(m.content))]
        asked = _PROMPT.match(str(prompts[-1].content)) if prompts else None
        label = asked["label"] if asked else "?"
        calls_path = os.environ.get(CALLS_VARIABLE)
        if calls_path:
            line = json.dumps({"thread": label, "request": request}, sort_keys=True) + "\n"
            # One write of one line in append mode: lines from concurrent processes do not interleave.
            with open(calls_path, "a", encoding="utf-8") as out:
                out.write(line)
        last = messages[-1]
        if asked and isinstance(last, HumanMessage):
            reply = AIMessage(
                "", tool_calls=[{"name": "read_file", "args": {"path": asked["path"]}, "id": asked["call"]}]
            )
        else:
            digest = hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()[:16]
            reply = AIMessage(f"Read it; request digest {digest}.")
        return ChatResult(generations=[ChatGeneration(message=reply)])


def build(checkpointer: Any = None) -> Any:
    """The agent, with its private state hidden (what the server serves), on `checkpointer`."""
    persist = os.environ.get(PERSIST_VARIABLE, "") == "1"
    model = ScriptedModel(profile={"max_input_tokens": WINDOW})
    middleware = HistoryKitMiddleware(default_pipeline(context_window=WINDOW), persist=persist)
    graph = create_agent(model, [read_file], middleware=[middleware], checkpointer=checkpointer)
    return hide_private_state(graph)


agent = build()
