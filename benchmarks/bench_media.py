"""Old screenshots out of the request: bytes and tokens per call of a browser agent, with and
without `ClearMedia`.

A generated computer-use session: the user's task, then `--steps` (60) model calls, each taking a
screenshot, a 1280x800 PNG of about 100 KB (text lines and a photo block, drawn with Pillow,
seeded: the same bytes on every run). The session runs through real agents, a Pydantic AI agent
(`FunctionModel`, `capabilities=[HistoryKit(...)]`) and a LangChain `create_agent` graph with
`HistoryKitMiddleware`, in persistent mode, and the model records each request it is sent:

- bytes: the request's messages as JSON (Pydantic AI's `ModelMessagesTypeAdapter`, LangChain's
  `messages_to_dict`), images base64-encoded as every provider API takes them;
- tokens: historykit's count (1,000 per image, `historykit._tokens.IMAGE_TOKENS`), and at Anthropic's
  rate for a 1280x800 image (width x height / 750 = 1,365 tokens);
- cost: the session's input priced as a prompt cache prices it (`replay.py`: the prefix the previous
  request shares 0.1 per token, the rest 1.25), with Anthropic-rate tokens.

Configurations: no processor (`Repair` only), and `ClearMedia(keep=3, batch=...)` for each of
`--batches` (1, 3, 5, 10; 5 is the default).

Run: `.venv/bin/python benchmarks/bench_media.py` (about 30 s); `--steps`, `--keep`, `--batches`,
`--frameworks` to vary it.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from historykit import Pipeline
from historykit._frameworks import adapter_for
from historykit._messages import MediaPart, ToolResultPart
from historykit._tokens import TokenCounter
from historykit.processors import ClearMedia, Repair

WIDTH, HEIGHT = 1280, 800
ANTHROPIC_IMAGE_TOKENS = WIDTH * HEIGHT // 750
"""Anthropic's estimate for an image that needs no resizing: width x height / 750."""
CACHE_READ, CACHE_WRITE = 0.1, 1.25
COUNTER = TokenCounter()
WORDS = ["flight", "Lisbon", "price", "€129", "depart", "10:35", "TAP", "select", "seat", "return"]


def screenshot(step: int) -> bytes:
    """A made-up 1280x800 browser screenshot, about 100 KB as PNG, different at every step."""
    from PIL import Image, ImageDraw

    rng = random.Random(step)
    image = Image.new("RGB", (WIDTH, HEIGHT), "white")
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, 0, WIDTH, 60), fill=(30, 60, 120))
    draw.text((40, 20), f"Book a flight: step {step}", fill=(255, 255, 255))
    for y in range(90, HEIGHT - 20, 22):
        draw.text((40, y), " ".join(rng.choice(WORDS) for _ in range(12)), fill=(20, 20, 20))
    side = 95  # a photo: the incompressible part of a real page
    image.paste(Image.frombytes("RGB", (side, side), rng.randbytes(side * side * 3)), (1000, 120))
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


@dataclass
class Request:
    bytes: int
    tokens: int
    anthropic_tokens: int
    images: int
    messages: list[Any] = field(repr=False)


def measure(messages: Sequence[Any], to_json: Callable[[Sequence[Any]], bytes]) -> Request:
    neutral = adapter_for(messages).to_neutral(messages)
    images = sum(
        isinstance(m, MediaPart)
        for msg in neutral
        for part in msg.parts
        for m in (part.media if isinstance(part, ToolResultPart) else (part,))
    )
    tokens = sum(COUNTER.count_message(m) for m in neutral)
    anthropic = tokens + images * (ANTHROPIC_IMAGE_TOKENS - 1_000)
    return Request(len(to_json(messages)), tokens, anthropic, images, list(messages))


def priced(requests: list[Request], same: Callable[[Any, Any], bool]) -> float:
    """The session's input as a prompt cache prices it, in Anthropic-rate token units."""
    cost = 0.0
    previous: list[Any] = []
    for request in requests:
        shared = 0
        for a, b in zip(previous, request.messages):
            if not same(a, b):
                break
            shared += 1
        # The cached share, weighed by the messages' token counts.
        neutral = adapter_for(request.messages).to_neutral(request.messages)
        sizes = [COUNTER.count_message(m) for m in neutral]
        total = sum(sizes) or 1
        cached = sum(sizes[:shared]) / total * request.anthropic_tokens
        cost += CACHE_READ * cached + CACHE_WRITE * (request.anthropic_tokens - cached)
        previous = request.messages
    return cost


# --- Pydantic AI ------------------------------------------------------------------------------------


def run_pydantic_ai(pipeline: Pipeline, steps: int, shots: list[bytes]) -> list[Request]:
    from pydantic_ai import Agent, BinaryContent
    from pydantic_ai import messages as pai
    from pydantic_ai.messages import ModelMessagesTypeAdapter
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import UsageLimits

    from historykit.plugins.pydantic_ai import HistoryKit

    requests: list[Request] = []

    def respond(messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        requests.append(measure(messages, ModelMessagesTypeAdapter.dump_json))
        taken = len(requests) - 1
        if taken < steps:
            call = pai.ToolCallPart(
                "screenshot", {"url": f"https://example.com/step/{taken}"}, f"call_{taken}"
            )
            return pai.ModelResponse([pai.TextPart(f"Clicking through step {taken}."), call])
        return pai.ModelResponse([pai.TextPart("Booked.")])

    agent = Agent(FunctionModel(respond), capabilities=[HistoryKit(pipeline, context_window=1_000_000)])

    @agent.tool_plain
    def screenshot(url: str) -> Any:
        """Screenshot the page."""
        return BinaryContent(shots[int(url.rsplit("/", 1)[1])], media_type="image/png")

    agent.run_sync(
        "Book the cheapest flight to Lisbon next Friday.", usage_limits=UsageLimits(request_limit=None)
    )
    return requests


# --- LangChain --------------------------------------------------------------------------------------


def run_langchain(pipeline: Pipeline, steps: int, shots: list[bytes]) -> list[Request]:
    from langchain.agents import create_agent
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, messages_to_dict
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool

    from historykit.plugins.langchain import HistoryKitMiddleware

    encoded = [base64.b64encode(s).decode() for s in shots]
    requests: list[Request] = []

    def to_json(messages: Sequence[BaseMessage]) -> bytes:
        return json.dumps(messages_to_dict(list(messages))).encode()

    class Browser(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "browser"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Browser:
            return self

        def _generate(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> Any:
            requests.append(measure(messages, to_json))
            taken = len(requests) - 1
            if taken < steps:
                call = {
                    "id": f"call_{taken}",
                    "name": "screenshot",
                    "args": {"url": f"https://example.com/step/{taken}"},
                }
                message = AIMessage(f"Clicking through step {taken}.", tool_calls=[call])
            else:
                message = AIMessage("Booked.")
            return ChatResult(generations=[ChatGeneration(message=message)])

    @tool
    def screenshot(url: str) -> list[dict[str, Any]]:
        """Screenshot the page."""
        return [{"type": "image", "base64": encoded[int(url.rsplit("/", 1)[1])], "mime_type": "image/png"}]

    middleware = HistoryKitMiddleware(pipeline, context_window=1_000_000, persist=True)
    agent = create_agent(Browser(), [screenshot], middleware=[middleware])
    agent.invoke(
        {"messages": [HumanMessage("Book the cheapest flight to Lisbon next Friday.")]},
        {"recursion_limit": 1_000},
    )
    return requests


# --- the report -------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--keep", type=int, default=3)
    parser.add_argument(
        "--batches", type=int, nargs="+", default=[1, 3, 5, 10], help="ClearMedia batch sizes"
    )
    parser.add_argument("--frameworks", nargs="+", default=["pydantic-ai", "langchain"])
    args = parser.parse_args()

    started = time.process_time()
    shots = [screenshot(step) for step in range(args.steps)]
    sizes = sorted(len(s) for s in shots)
    print(
        f"{args.steps} screenshots, {WIDTH}x{HEIGHT} PNG, median {sizes[len(sizes) // 2] / 1000:.0f} KB "
        f"(min {sizes[0] / 1000:.0f}, max {sizes[-1] / 1000:.0f}); Anthropic rate {ANTHROPIC_IMAGE_TOKENS:,} "
        "tokens per image\n"
    )
    configurations: dict[str, Callable[[], Pipeline]] = {"none": lambda: Pipeline([Repair()])}
    for batch in args.batches:
        configurations[f"ClearMedia(keep={args.keep}, batch={batch})"] = lambda batch=batch: Pipeline(
            [ClearMedia(keep=args.keep, batch=batch), Repair()]
        )
    header = (
        f"{'framework':<12} {'configuration':<28} {'last call KB':>12} {'mean KB':>8} {'total MB':>9} "
        f"{'last tokens':>11} {'last (Anthropic)':>16} {'images sent':>11} {'cache-priced input':>18}"
    )
    print(header)
    print("-" * len(header))
    runners = {"pydantic-ai": run_pydantic_ai, "langchain": run_langchain}
    series: dict[tuple[str, str], list[Request]] = {}
    for framework in args.frameworks:
        runner = runners[framework]
        baseline: float | None = None
        for name, make in configurations.items():
            requests = series[framework, name] = runner(make(), args.steps, shots)
            last = requests[-1]
            total_bytes = sum(r.bytes for r in requests)
            cost = priced(requests, lambda a, b: a == b)
            baseline = cost if baseline is None else baseline
            print(
                f"{framework:<12} {name:<28} {last.bytes / 1000:>12,.0f} "
                f"{total_bytes / len(requests) / 1000:>8,.0f} "
                f"{total_bytes / 1e6:>9,.1f} {last.tokens:>11,} {last.anthropic_tokens:>16,} "
                f"{sum(r.images for r in requests):>11,} {cost:>12,.0f} ({cost / baseline:>4.0%})"
            )
    # Per call: the request with every screenshot against the default `ClearMedia()` (batch 5).
    framework = args.frameworks[0]
    default = next((name for name in configurations if name.endswith("batch=5)")), list(configurations)[-1])
    points = sorted({0, *range(9, args.steps + 1, 10), args.steps})
    print(f"\nper call ({framework}): request KB / tokens at Anthropic's rate / images sent")
    print(f"{'call':>5} {'none':>26} {default:>40}")
    for point in points:
        a, b = series[framework, "none"][point], series[framework, default][point]
        print(
            f"{point + 1:>5} {a.bytes / 1000:>8,.0f} KB {a.anthropic_tokens:>7,} {a.images:>3} img "
            f"{b.bytes / 1000:>22,.0f} KB {b.anthropic_tokens:>7,} {b.images:>3} img"
        )
    print(f"\nCPU time: {time.process_time() - started:.1f} s")


if __name__ == "__main__":
    main()
