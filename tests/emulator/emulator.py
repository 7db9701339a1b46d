"""The emulator: routes requests, records them, and builds SDK clients that talk to it."""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.emulator.anthropic_api import count_tokens_response, handle_messages
from tests.emulator.errors import Rejection
from tests.emulator.models import DEFAULT_CONTEXT_WINDOW
from tests.emulator.openai_api import handle_chat, handle_compact, handle_responses
from tests.emulator.script import Api, EmulatedRequest, Script, Turn
from tests.emulator.signing import Signer, canonical

__all__ = ["ProviderEmulator", "RecordedRequest", "extends"]

_ROUTES: dict[str, Api] = {
    "/v1/messages": "anthropic",
    "/v1/responses/compact": "openai-compact",
    "/v1/chat/completions": "openai-chat",
    "/v1/responses": "openai-responses",
}


@dataclass
class RecordedRequest:
    """One request the emulator received, with how it answered."""

    request: EmulatedRequest
    """The parsed request."""
    status: int
    """The HTTP status it answered with."""
    response: dict[str, Any]
    """The JSON it answered with (the error body on a rejection; the full message when streamed)."""
    rejection: Rejection | None = None
    """The broken rule, when rejected."""

    @property
    def api(self) -> Api:
        return self.request.api

    @property
    def body(self) -> dict[str, Any]:
        return self.request.body

    def history(self) -> dict[str, Any]:
        """What the request sent the model, canonical (cache markers dropped): to compare two requests."""
        body = self.body
        if self.api == "anthropic":
            system = body.get("system")
            return canonical(
                {
                    "system": [{"type": "text", "text": system}] if isinstance(system, str) else system or [],
                    "tools": body.get("tools") or [],
                    "messages": [
                        {
                            "role": m.get("role"),
                            "content": [{"type": "text", "text": m["content"]}]
                            if isinstance(m.get("content"), str)
                            else m.get("content"),
                        }
                        for m in body.get("messages", [])
                    ],
                }
            )
        if self.api == "openai-chat":
            return canonical({"tools": body.get("tools") or [], "messages": body.get("messages", [])})
        items = body.get("input")
        items = [{"role": "user", "content": items}] if isinstance(items, str) else items or []
        return canonical(
            {"instructions": body.get("instructions"), "tools": body.get("tools") or [], "messages": items}
        )


@dataclass
class ProviderEmulator:
    """Anthropic Messages, OpenAI Chat Completions and OpenAI Responses, played from a script.

    Example:
        ```python
        emulator = ProviderEmulator(lambda request: Turn(text="hello"))
        client = emulator.anthropic_client()
        messages = [{"role": "user", "content": "hi"}]
        client.messages.create(model="claude-opus-5-5", max_tokens=100, messages=messages)
        assert emulator.rejected == []
        ```
    """

    script: Script
    """Answers each accepted request with the next turn."""
    context_windows: Mapping[str, int] = field(default_factory=dict)
    """Window per model id (a prefix matches dated ids); others get `default_context_window`."""
    default_context_window: int = DEFAULT_CONTEXT_WINDOW
    """Window of a model not in `context_windows`."""
    enforce_prefix_check: bool = True
    """Binding models reject a stale thinking block by default (an account created since 2026-08-31);
    `False` is an older account: the check runs only when the request sets `block_binding`."""
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(16))
    """Signing key of the thinking this emulator produces."""
    received: list[RecordedRequest] = field(default_factory=list)
    """Every request, in order: the recorder."""
    stored_items: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Responses API output items by id (for `item_reference` inputs)."""
    reasoning_followers: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Responses API: the item produced right after each reasoning item (R9)."""

    compaction_summaries: list[str] = field(default_factory=list)
    """Every summary a compaction request wrote (Anthropic's readable one; OpenAI's encrypted one)."""

    def __post_init__(self) -> None:
        self.signer = Signer(self.secret)

    def compaction_summary(self, conversation: list[dict[str, Any]]) -> str:
        """The summary a compaction request writes: deterministic, naming what it summarized (the
        number of messages and the user's first words), so a test can tell it was sent back."""
        texts = [_first_text(m) for m in conversation if m.get("role") == "user"]
        asked = next((t for t in texts if t), "")
        summary = f"Summary of {len(conversation)} messages. The user asked: {asked[:200]}"
        self.compaction_summaries.append(summary)
        return summary

    # --- what tests read ---

    @property
    def rejected(self) -> list[RecordedRequest]:
        return [r for r in self.received if r.status >= 400]

    @property
    def accepted(self) -> list[RecordedRequest]:
        return [r for r in self.received if r.status < 400]

    def context_window(self, model: str) -> int:
        for name, window in self.context_windows.items():
            if model.startswith(name):
                return window
        return self.default_context_window

    # --- the server side ---

    def handle(
        self, method: str, path: str, headers: Mapping[str, str], content: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        """Answer one HTTP request: status, headers, body."""
        if path.endswith("/v1/messages/count_tokens") and method == "POST":
            return (
                200,
                {"content-type": "application/json"},
                json.dumps(count_tokens_response(json.loads(content))).encode(),
            )
        api = next((a for p, a in _ROUTES.items() if path.endswith(p)), None)
        if method != "POST" or api is None:
            body = {
                "error": {"message": f"Unknown request URL: {method} {path}", "type": "invalid_request_error"}
            }
            return 404, {"content-type": "application/json"}, json.dumps(body).encode()
        lowered = {k.lower(): v for k, v in headers.items()}
        request = EmulatedRequest(api, path, json.loads(content or b"{}"), lowered)

        def turn_for() -> Turn:
            return self.script(request)

        try:
            if api == "anthropic":
                result = handle_messages(self, request.body, lowered, turn_for)
                response, events = result.response, result.events
            elif api == "openai-chat":
                response, events = handle_chat(self, request.body, turn_for), []
            elif api == "openai-compact":
                response, events = handle_compact(self, request.body), []
            else:
                response, events = handle_responses(self, request.body, turn_for), []
        except Rejection as rejection:
            error = rejection.body()
            self.received.append(RecordedRequest(request, rejection.status, error, rejection))
            return rejection.status, {"content-type": "application/json"}, json.dumps(error).encode()
        self.received.append(RecordedRequest(request, 200, response))
        if request.body.get("stream"):
            if api != "anthropic":
                raise NotImplementedError("the emulator streams the Anthropic Messages API only")
            stream = "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)
            return 200, {"content-type": "text/event-stream"}, stream.encode()
        return (
            200,
            {"content-type": "application/json", "request-id": f"req_{secrets.token_hex(8)}"},
            json.dumps(response).encode(),
        )

    # --- the client side ---

    def transport(self, httpx_module: Any) -> Any:
        """A `MockTransport` of `httpx_module` (`httpx`, or the newer SDKs' `httpx2`), sync and async."""

        def handler(request: Any) -> Any:
            status, headers, body = self.handle(
                request.method, request.url.path, dict(request.headers), request.read()
            )
            return httpx_module.Response(status, headers=headers, content=body)

        return httpx_module.MockTransport(handler)

    def http_client(self, sdk: str, *, async_: bool = False) -> Any:
        """An http client of the kind the installed `sdk` (`anthropic` / `openai`) expects, routed here."""
        httpx_module = _sdk_httpx(sdk)
        cls = httpx_module.AsyncClient if async_ else httpx_module.Client
        return cls(transport=self.transport(httpx_module))

    def anthropic_client(self, *, async_: bool = False, **kwargs: Any) -> Any:
        import anthropic

        cls = anthropic.AsyncAnthropic if async_ else anthropic.Anthropic
        kwargs.setdefault("max_retries", 0)
        return cls(api_key="emulated", http_client=self.http_client("anthropic", async_=async_), **kwargs)

    def openai_client(self, *, async_: bool = False, **kwargs: Any) -> Any:
        import openai

        cls = openai.AsyncOpenAI if async_ else openai.OpenAI
        kwargs.setdefault("max_retries", 0)
        return cls(api_key="emulated", http_client=self.http_client("openai", async_=async_), **kwargs)

    def chat_anthropic(self, model: str, **kwargs: Any) -> Any:
        """A LangChain `ChatAnthropic` whose SDK clients talk to this emulator."""
        from langchain_anthropic import ChatAnthropic

        llm = ChatAnthropic(model=model, api_key="emulated", max_retries=0, **kwargs)  # type: ignore[call-arg]
        # It takes no http client: its SDK clients are cached properties, filled in here before first use.
        llm.__dict__["_client"] = self.anthropic_client()
        llm.__dict__["_async_client"] = self.anthropic_client(async_=True)
        return llm

    def chat_openai(self, model: str, **kwargs: Any) -> Any:
        """A LangChain `ChatOpenAI` on this emulator (Responses API with `use_responses_api=True`)."""
        from langchain_openai import ChatOpenAI

        return ChatOpenAI(
            model=model,
            api_key="emulated",  # type: ignore[arg-type]
            max_retries=0,
            http_client=self.http_client("openai"),
            http_async_client=self.http_client("openai", async_=True),
            **kwargs,
        )


def _first_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    for block in content or []:
        if isinstance(block, dict) and block.get("type") in ("text", "input_text") and block.get("text"):
            return str(block["text"])
    return ""


def _sdk_httpx(sdk: str) -> Any:
    """`httpx2` when the SDK's base client is built on it (anthropic>=1, openai>=3), else `httpx`."""
    import importlib

    base = importlib.import_module(f"{sdk}._base_client")
    module = getattr(base, "httpx2", None) or base.httpx
    return module


def extends(previous: RecordedRequest, current: RecordedRequest) -> bool:
    """Whether `current` sends `previous`'s history unchanged plus messages after it (append-only).

    Compared canonically (cache markers and `None` fields dropped; Anthropic string content as a text
    block), which is also what the prefix check on thinking compares.
    """
    before, after = previous.history(), current.history()
    heads_equal = all(before.get(k) == after.get(k) for k in before if k != "messages")
    old, new = before["messages"], after["messages"]
    return heads_equal and new[: len(old)] == old
