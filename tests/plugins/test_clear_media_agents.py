"""`ClearMedia` through real agents: a browser agent takes a screenshot at every step; the model
(a Pydantic AI `FunctionModel`, a LangChain scripted chat model) records every request it is sent.
Each request holds the newest `KEEP` screenshots, older ones are placeholders naming the call, the
user's task image stays; in both modes, and the stores' transcripts keep every original image."""

from __future__ import annotations

import base64
import importlib.metadata
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from historykit import Pipeline, check
from historykit.processors import ClearMedia, Repair

KEEP = 2
STEPS = 7
PLACEHOLDER = re.compile(
    r"\[image removed from the request to save context: image/png, [\d.]+ KB, returned by "
    r"screenshot\(url='https://example\.com/page/(\d+)'\)"
    r"(?:; recall\(handle='([0-9a-f]{10})'\) shows it again)?\]"
)


def png(step: int) -> bytes:
    """A made-up screenshot of about 12 KB, different at every step."""
    return b"\x89PNG\r\n\x1a\n" + f"page {step} ".encode() * 1_200


def pipeline() -> Pipeline:
    return Pipeline([ClearMedia(keep=KEEP, batch=1), Repair()])


def sent_screenshots(steps_seen: list[int], taken: int) -> None:
    """The request after `taken` screenshots holds the newest `KEEP` of them, in order."""
    assert steps_seen == list(range(max(taken - KEEP, 0), taken))


# --- Pydantic AI ------------------------------------------------------------------------------------

_PAI2 = not importlib.metadata.version("pydantic-ai-slim").startswith("1.")
needs_pai2 = pytest.mark.skipif(not _PAI2, reason="tools return images themselves in Pydantic AI 2.x")


class BrowsingModel:
    """Takes `STEPS` screenshots, one per call, then answers; records what each request held."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def respond(self, messages: list[Any], info: Any) -> Any:
        from pydantic_ai import messages as pai

        images: list[int] = []
        placeholders: list[int] = []
        user_images = 0
        for message in messages:
            for part in message.parts if isinstance(message, pai.ModelRequest) else ():
                if isinstance(part, pai.ToolReturnPart):
                    items = part.content if isinstance(part.content, list) else [part.content]
                    for item in items:
                        if isinstance(item, pai.BinaryContent):
                            images.append(int(item.data[8:].split(b" ")[1]))
                        elif isinstance(item, str) and (found := PLACEHOLDER.fullmatch(item)):
                            placeholders.append(int(found[1]))
                elif isinstance(part, pai.UserPromptPart) and isinstance(part.content, list):
                    user_images += sum(isinstance(i, pai.BinaryContent) for i in part.content)
        self.requests.append(
            {
                "images": images,
                "placeholders": placeholders,
                "user_images": user_images,
                "valid": check(messages),
            }
        )
        taken = len(images) + len(placeholders)
        if taken < STEPS:
            call = pai.ToolCallPart(
                "screenshot", {"url": f"https://example.com/page/{taken}"}, f"call_{taken}"
            )
            return pai.ModelResponse([call])
        return pai.ModelResponse([pai.TextPart("Booked.")])


def browsing_agent(model: BrowsingModel, kit: Any) -> Any:
    from pydantic_ai import Agent, BinaryContent
    from pydantic_ai.models.function import FunctionModel

    agent = Agent(FunctionModel(model.respond), capabilities=[kit])

    @agent.tool_plain
    def screenshot(url: str) -> Any:  # a `BinaryContent` (annotations are postponed here)
        """Screenshot the page at `url`."""
        return BinaryContent(png(int(url.rsplit("/", 1)[1])), media_type="image/png")

    return agent


def task() -> list[Any]:
    from pydantic_ai import BinaryContent

    return [
        "Make the booking page look like this mockup:",
        BinaryContent(b"\x89PNG mockup", media_type="image/png"),
    ]


def assert_requests(requests: list[dict[str, Any]]) -> None:
    assert len(requests) == STEPS + 1
    for taken, request in enumerate(requests):
        sent_screenshots(request["images"], taken)
        assert request["placeholders"] == list(range(max(taken - KEEP, 0)))
        assert request["user_images"] == 1  # the task's mockup stays: it is the latest request
        assert request["valid"] == []


@needs_pai2
@pytest.mark.pydantic_ai
@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view-only"])
async def test_pydantic_ai_requests_hold_the_newest_screenshots(persist: bool, tmp_path: Path) -> None:
    from pydantic_ai import BinaryContent
    from pydantic_ai import messages as pai
    from pydantic_ai.conversation import Conversation

    from historykit.checkpointers import SQLModelConversationStore
    from historykit.plugins.pydantic_ai import HistoryKit

    store = SQLModelConversationStore(f"sqlite:///{tmp_path / 'chat.db'}")
    model = BrowsingModel()
    agent = browsing_agent(model, HistoryKit(pipeline(), context_window=200_000, persist=persist))

    result = await agent.run(task(), conversation=Conversation(conversation_id="c1"))
    await store.save(result)

    assert result.output == "Booked."
    assert_requests(model.requests)
    returns = [p for m in result.all_messages() if isinstance(m, pai.ModelRequest) for p in m.parts]
    kept = [p.content for p in returns if isinstance(p, pai.ToolReturnPart)]
    if persist:  # the run's history is the view: placeholders where the old screenshots were
        assert sum(isinstance(c, str) and PLACEHOLDER.fullmatch(c) is not None for c in kept) == STEPS - KEEP
    else:  # the run's history is the raw one: every screenshot as the tool returned it
        assert [c.data for c in kept if isinstance(c, BinaryContent)] == [png(n) for n in range(STEPS)]
    # The store's transcript keeps every original screenshot, whatever the view sent.
    transcript = await store.transcript("c1")
    assert transcript is not None
    stored = [
        p.content.data
        for m in transcript.messages
        if isinstance(m, pai.ModelRequest)
        for p in m.parts
        if isinstance(p, pai.ToolReturnPart) and isinstance(p.content, BinaryContent)
    ]
    assert stored == [png(n) for n in range(STEPS)]


# --- LangChain --------------------------------------------------------------------------------------


def lc_png(step: int) -> str:
    return base64.b64encode(png(step)).decode()


def langchain_agent(
    persist: bool, checkpointer: Any, *, recall: Any = False, wrap: Callable[[Any], Any] | None = None
) -> tuple[Any, Any]:
    """A browsing `create_agent` graph and its scripted model; `wrap` is given the browsing script
    and returns the one the model follows."""
    pytest.importorskip("langgraph", reason="needs LangGraph and LangChain (the langgraph extra)")
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
    from langchain_core.tools import tool

    from historykit.plugins.langchain import HistoryKitMiddleware
    from tests.plugins.test_recall_langgraph import ScriptedChatModel

    @tool
    def screenshot(url: str) -> list[dict[str, Any]]:
        """Screenshot the page at `url`."""
        step = int(url.rsplit("/", 1)[1])
        return [
            {"type": "text", "text": f"page {step} loaded"},
            {"type": "image", "base64": lc_png(step), "mime_type": "image/png"},
        ]

    def respond(messages: list[BaseMessage]) -> AIMessage:
        taken = sum(isinstance(m, ToolMessage) for m in messages)
        if taken < STEPS:
            call = {
                "id": f"call_{taken}",
                "name": "screenshot",
                "args": {"url": f"https://example.com/page/{taken}"},
            }
            return AIMessage("", tool_calls=[call])
        return AIMessage("Booked.")

    model = ScriptedChatModel(respond=wrap(respond) if wrap is not None else respond)
    middleware = HistoryKitMiddleware(pipeline(), context_window=200_000, persist=persist, recall=recall)
    agent = create_agent(model, [screenshot], middleware=[middleware], checkpointer=checkpointer)
    return agent, model


def lc_request(messages: list[Any]) -> dict[str, Any]:
    from langchain_core.messages import HumanMessage, ToolMessage

    images: list[int] = []
    placeholders: list[int] = []
    user_images = 0
    for message in messages:
        blocks = message.content if isinstance(message.content, list) else []
        for block in blocks:
            if isinstance(message, ToolMessage) and block.get("type") == "image":
                images.append(int(base64.b64decode(block["base64"])[8:].split(b" ")[1]))
            elif isinstance(message, ToolMessage) and block.get("type") == "text":
                if found := PLACEHOLDER.fullmatch(block["text"]):
                    placeholders.append(int(found[1]))
            elif isinstance(message, HumanMessage) and block.get("type") == "image":
                user_images += 1
    return {
        "images": images,
        "placeholders": placeholders,
        "user_images": user_images,
        "valid": check(messages),
    }


def lc_task() -> Any:
    from langchain_core.messages import HumanMessage

    mockup = base64.b64encode(b"\x89PNG mockup").decode()
    return HumanMessage(
        [
            {"type": "text", "text": "Make the booking page look like this mockup:"},
            {"type": "image", "base64": mockup, "mime_type": "image/png"},
        ]
    )


@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view-only"])
def test_langchain_requests_hold_the_newest_screenshots(persist: bool, tmp_path: Path) -> None:
    from langchain_core.messages import ToolMessage

    from historykit.checkpointers import SQLModelSaver

    saver = SQLModelSaver(f"sqlite:///{tmp_path / 'agent.db'}")
    agent, model = langchain_agent(persist, saver)
    config = {"recursion_limit": 100, "configurable": {"thread_id": "t1"}}

    out = agent.invoke({"messages": [lc_task()]}, config)

    assert out["messages"][-1].content == "Booked."
    assert_requests([lc_request(messages) for messages in model.inputs])
    results = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    texts = [b.get("text", "") for m in results for b in m.content]
    # Every tool message keeps its own text; in persistent mode the state holds the placeholders.
    assert [t for t in texts if t.endswith("loaded")] == [f"page {n} loaded" for n in range(STEPS)]
    assert sum(PLACEHOLDER.fullmatch(t) is not None for t in texts) == (STEPS - KEEP if persist else 0)
    # The saver's transcript keeps every original screenshot.
    transcript = saver.transcript("t1")
    assert transcript is not None
    stored = [
        b["base64"]
        for m in transcript.messages
        if isinstance(m, ToolMessage)
        for b in m.content
        if isinstance(b, dict) and b.get("type") == "image"
    ]
    assert stored == [lc_png(n) for n in range(STEPS)]


@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view-only"])
def test_langchain_the_task_image_goes_once_the_user_writes_again(persist: bool, tmp_path: Path) -> None:
    from langchain_core.messages import HumanMessage

    from historykit.checkpointers import SQLModelSaver

    saver = SQLModelSaver(f"sqlite:///{tmp_path / 'agent.db'}")
    agent, model = langchain_agent(persist, saver)
    config = {"recursion_limit": 100, "configurable": {"thread_id": "t1"}}
    agent.invoke({"messages": [lc_task()]}, config)
    agent.invoke({"messages": [HumanMessage("Now pick a window seat.")]}, config)

    last = model.inputs[-1]
    request = lc_request(last)
    assert request["user_images"] == 0  # the first task's mockup is no longer the latest request
    sent_screenshots(request["images"], STEPS)
    first = last[0]
    assert isinstance(first, HumanMessage) and first.content[1] == {
        "type": "text",
        "text": "[image removed from the request to save context: image/png, 11 bytes, sent by the user]",
    }
    assert request["valid"] == []


# --- recall: the model gets a removed screenshot back ------------------------------------------------


class RecallingBrowser(BrowsingModel):
    """Browses, then recalls the first screenshot by the handle its placeholder names (when it names
    one) and answers with what came back."""

    def __init__(self) -> None:
        super().__init__()
        self.handles: list[str | None] = []
        self.recalled: list[Any] = []

    def respond(self, messages: list[Any], info: Any) -> Any:
        from pydantic_ai import messages as pai

        latest = messages[-1]
        for part in latest.parts if isinstance(latest, pai.ModelRequest) else ():
            if isinstance(part, pai.ToolReturnPart) and part.tool_name == "recall":
                self.recalled.append(part.content)
                return pai.ModelResponse([pai.TextPart("Seen it again.")])
        answer = super().respond(messages, info)
        if not isinstance(answer.parts[0], pai.TextPart):
            return answer
        for message in messages:
            for part in message.parts if isinstance(message, pai.ModelRequest) else ():
                content = part.content if isinstance(part, pai.ToolReturnPart) else None
                if isinstance(content, str) and (found := PLACEHOLDER.fullmatch(content)):
                    self.handles.append(found[2])
                    if found[2] is not None:
                        return pai.ModelResponse([pai.ToolCallPart("recall", {"handle": found[2]}, "call_r")])
                    return answer
        return answer


@needs_pai2
@pytest.mark.pydantic_ai
def test_pydantic_ai_recall_returns_the_screenshot_itself_in_view_only_mode() -> None:
    from pydantic_ai import BinaryContent

    from historykit.plugins.pydantic_ai import HistoryKit

    model = RecallingBrowser()
    agent = browsing_agent(model, HistoryKit(pipeline(), context_window=200_000, persist=False, recall=True))

    result = agent.run_sync(task())

    assert result.output == "Seen it again."
    assert model.handles[0] is not None
    (image,) = model.recalled
    assert isinstance(image, BinaryContent) and image.data == png(0) and image.media_type == "image/png"


@needs_pai2
@pytest.mark.pydantic_ai
def test_pydantic_ai_persistent_mode_offers_no_handle_it_could_not_serve(tmp_path: Path) -> None:
    """The conversation store saves the run when it ends: an image removed during the run is
    nowhere to be found, so the placeholder names no handle, even with a store."""
    from historykit import Recall
    from historykit.checkpointers import SQLModelConversationStore
    from historykit.plugins.pydantic_ai import HistoryKit

    store = SQLModelConversationStore(f"sqlite:///{tmp_path / 'chat.db'}")
    model = RecallingBrowser()
    kit = HistoryKit(pipeline(), context_window=200_000, persist=True, recall=Recall(store=store))
    result = browsing_agent(model, kit).run_sync(task())

    assert result.output == "Booked."
    assert model.handles and model.handles[0] is None and model.recalled == []
    assert_requests(model.requests)


def recalling_langchain_agent(persist: bool, checkpointer: Any, recall: Any) -> tuple[Any, Any, list[Any]]:
    """`langchain_agent` with the recall tool, and a model that recalls the first screenshot by the
    handle its placeholder names once it has taken them all."""
    from langchain_core.messages import AIMessage, ToolMessage

    recalled: list[Any] = []

    def wrap(browse: Callable[[list[Any]], AIMessage]) -> Callable[[list[Any]], AIMessage]:
        def respond(messages: list[Any]) -> AIMessage:
            latest = messages[-1]
            if isinstance(latest, ToolMessage) and latest.name == "recall":
                recalled.append(latest.content)
                return AIMessage("Seen it again.")
            answer = browse(messages)
            if answer.tool_calls:
                return answer
            for message in messages:
                for block in message.content if isinstance(message, ToolMessage) else ():
                    found = PLACEHOLDER.fullmatch(block.get("text", "")) if isinstance(block, dict) else None
                    if found and found[2] is not None:
                        call = {"id": "call_r", "name": "recall", "args": {"handle": found[2]}}
                        return AIMessage("", tool_calls=[call])
            return answer

        return respond

    agent, model = langchain_agent(persist, checkpointer, recall=recall, wrap=wrap)
    return agent, model, recalled


@pytest.mark.parametrize("persist", [True, False], ids=["persistent-with-the-saver", "view-only"])
def test_langchain_recall_returns_the_screenshot_itself(persist: bool, tmp_path: Path) -> None:
    from historykit import Recall
    from historykit.checkpointers import SQLModelSaver

    saver = SQLModelSaver(f"sqlite:///{tmp_path / 'agent.db'}")
    agent, model, recalled = recalling_langchain_agent(
        persist, saver, Recall(store=saver) if persist else True
    )
    config = {"recursion_limit": 100, "configurable": {"thread_id": "t1"}}

    out = agent.invoke({"messages": [lc_task()]}, config)

    assert out["messages"][-1].content == "Seen it again."
    ((block,),) = recalled
    assert block == {"type": "image", "base64": lc_png(0), "mime_type": "image/png"}
    assert "recall" in model.tools_offered


def test_langchain_persistent_mode_without_a_store_offers_no_handle(tmp_path: Path) -> None:
    from historykit.checkpointers import SQLModelSaver

    saver = SQLModelSaver(f"sqlite:///{tmp_path / 'agent.db'}")
    agent, model, recalled = recalling_langchain_agent(True, saver, True)
    config = {"recursion_limit": 100, "configurable": {"thread_id": "t1"}}

    out = agent.invoke({"messages": [lc_task()]}, config)

    assert out["messages"][-1].content == "Booked." and recalled == []
    sent = [
        b["text"]
        for m in model.inputs[-1]
        if isinstance(m.content, list)
        for b in m.content
        if b.get("type") == "text"
    ]
    found = [PLACEHOLDER.fullmatch(text) for text in sent]
    assert [f[2] for f in found if f] == [None] * (STEPS - KEEP)
