"""`make demo`: the bundled sample transcript, as both frameworks see it.

Loads the bundled sample session (a real Codex CLI transcript, see `data/SAMPLE-SOURCE.md`),
turns it into Pydantic AI and LangChain messages, and shows for each: the messages, where the
tokens go by kind, the provider-rule verdict of `historykit.check`, and that a history run through
an empty pipeline comes back as the very same objects. Then it plants two classic breakages (an
orphaned tool result, a tool call whose result was dropped) and shows `Repair` fixing them.

Run: `python -m historykit.demo [PATH.jsonl]`.
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from historykit import Pipeline, TokenCounter, check
from historykit.formats import read_chat_jsonl
from historykit.messages import Message
from historykit.plugins import Adapter
from historykit.processors import Repair

KIND_ORDER = (
    "system",
    "user",
    "assistant_text",
    "thinking",
    "tool_call",
    "tool_result",
    "media",
    "summary",
    "other",
)


def sample_path() -> Path:
    """The bundled sample transcript."""
    return Path(str(resources.files("historykit") / "data" / "sample_session.jsonl"))


def _adapters() -> list[Adapter]:
    adapters: list[Adapter] = []
    try:
        from historykit.plugins.pydantic_ai import PydanticAIAdapter

        adapters.append(PydanticAIAdapter())
    except ImportError as exc:
        print(f"(Pydantic AI is not installed: {exc}; `pip install historykit[pydantic-ai]`)")
    try:
        from historykit.plugins.langchain import LangChainAdapter

        adapters.append(LangChainAdapter())
    except ImportError as exc:
        print(f"(LangChain is not installed: {exc}; `pip install historykit[langgraph]`)")
    return adapters


def _summary(native: list[Any]) -> str:
    kinds: dict[str, int] = {}
    for msg in native:
        name = type(msg).__name__
        kinds[name] = kinds.get(name, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in kinds.items())


def _messages_table(adapter: Adapter, native: list[Any], counter: TokenCounter, limit: int = 8) -> Table:
    table = Table(title=f"first {limit} of {len(native)} {adapter.framework} messages", title_justify="left")
    for column in ("#", "native type", "neutral parts", "tokens", "preview"):
        table.add_column(column, justify="right" if column in ("#", "tokens") else "left")
    for index, msg in enumerate(native[:limit]):
        neutral = adapter.to_neutral([msg])
        parts = ", ".join(f"{m.role}:{p.kind}" for m in neutral for p in m.parts)
        preview = " ".join(_preview(m) for m in neutral)[:60].replace("\n", " ")
        table.add_row(str(index), type(msg).__name__, parts, f"{counter.per_message([msg])[0]:,}", preview)
    return table


def _preview(msg: Message) -> str:
    for part in msg.parts:
        for attr in ("text", "content", "name"):
            value = getattr(part, attr, "")
            if isinstance(value, str) and value.strip():
                return value.strip()
    return ""


def _breakdown_table(by_framework: dict[str, dict[str, int]]) -> Table:
    table = Table(title="where the tokens go (estimated)", title_justify="left")
    table.add_column("kind")
    for name in by_framework:
        table.add_column(name, justify="right")
    kinds = [k for k in (*KIND_ORDER, "overhead") if any(k in b for b in by_framework.values())]
    for kind in kinds:
        table.add_row(kind, *(f"{b.get(kind, 0):,}" for b in by_framework.values()))
    table.add_row("total", *(f"{sum(b.values()):,}" for b in by_framework.values()), style="bold")
    return table


def _plant_breakage(neutral: list[Message]) -> list[Message]:
    """Drop the result of the first tool call, and the call of the second one (leaving its result)."""
    calls = [i for i, m in enumerate(neutral) if m.role == "assistant" and m.tool_calls]
    first, second = calls[0], calls[1]
    return [m for i, m in enumerate(neutral) if i not in (first + 1, second)]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    path = Path(args[0]) if args else sample_path()
    console = Console()
    neutral = read_chat_jsonl(path)
    counter = TokenCounter()
    console.rule(f"historykit demo: {path.name}")
    console.print(f"{len(neutral)} messages read; tokenizer: {counter.tokenizer_name}")
    breakdowns: dict[str, dict[str, int]] = {}
    for adapter in _adapters():
        console.rule(adapter.framework)
        native = adapter.to_native(neutral)
        console.print(f"{len(native)} native messages: {_summary(native)}")
        console.print(_messages_table(adapter, native, counter))
        breakdowns[adapter.framework] = counter.breakdown(adapter.to_neutral(native))
        total = counter.count(native)
        console.print(f"total: {total.tokens:,} tokens ({total.method})")
        violations = check(native)
        verdict = (
            "[green]no provider-rule violation[/]"
            if not violations
            else f"[red]{len(violations)} violations[/]"
        )
        console.print(f"check(): {verdict}")
        same = Pipeline([]).run(native).messages
        console.print(
            f"untouched round trip returns the same objects: {all(a is b for a, b in zip(same, native))}"
        )
        broken = adapter.to_native(_plant_breakage(adapter.to_neutral(native)))
        console.print("after planting an orphan result and a missing result, check() says:")
        for violation in check(broken):
            console.print(f"  [yellow]{violation}[/]")
        repaired = Repair().run(broken)
        console.print(repaired.report)
        console.print(f"check() after Repair: {check(repaired.messages) or '[green]no violation[/]'}")
    if breakdowns:
        console.rule("token breakdown")
        console.print(_breakdown_table(breakdowns))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
