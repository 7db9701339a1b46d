"""The last resort when the final request alone does not fit: shorten its largest tool results.

Every other edit leaves the final request alone: it is what the model must answer (R11). But six
parallel file reads can by themselves be larger than the window, and then nothing else helps: the
provider rejects the call and the run fails. `fit_final_request` then cuts the middle out of the
largest tool results of the final request (their head and tail stay, with a line saying how much
was cut and how to get it), evenly, until the history fits. Each result stays, answering its call,
so no provider rule breaks; pinned results and every other part are never touched.

Example:
    ```python
    notes = StepNotes()
    messages = fit_final_request(messages, ctx, limit=28_800, notes=notes)
    ```
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from historykit._messages import Message, ToolResultPart
from historykit._recall import recall_call, recall_handle
from historykit._validity import final_request_start

if TYPE_CHECKING:
    from historykit._pipeline import ProcessContext, StepNotes


_CUT_NOTE = (
    "\n\n[historykit: about {cut:,} tokens of this {tool} result were cut here so the request fits the "
    "model's context window; {how}]\n\n"
)
_AGAIN = "call the tool again with a narrower range to read them"
_RECALL = "{call} returns the whole output, start_line= and end_line= a range of its lines"
"""With the recall tool installed, the note names the original's handle (`historykit.Recall`)."""
_HEAD_SHARE = 2 / 3
"""Share of what is kept that comes from the start of the text (the rest is its end)."""
_MIN_KEEP = 200
"""Tokens a shortened result keeps at least: below that, its head and tail say nothing."""
_ATTEMPTS = 4
"""Rounds of shortening: the token count of a cut text is estimated from its characters first."""


def fit_final_request(
    messages: list[Message], ctx: ProcessContext, limit: int, notes: StepNotes, recall_tool: str | None = None
) -> list[Message]:
    """`messages` with the final request's largest tool results shortened so the whole is at most
    `limit` tokens; the list itself when nothing needs (or can) be cut. With `recall_tool`, each
    note names the call that returns the whole output."""
    count = ctx.counter.count_message
    total = sum(map(count, messages))
    if total <= limit:
        return messages
    start = final_request_start(messages)
    # (message index, part index, tokens) of every result that may be shortened
    results = [
        (i, j, ctx.counter.count_text(part.content))
        for i in range(start, len(messages))
        if not messages[i].pinned
        for j, part in enumerate(messages[i].parts)
        if isinstance(part, ToolResultPart) and not part.pinned
    ]
    if not results:
        return messages
    before = total
    sizes = [size for _, _, size in results]
    budget = sum(sizes) - (total - limit)
    out = messages
    for _ in range(_ATTEMPTS):
        # Always cut from the originals: cutting a cut text again would stack notes.
        cap = _cap_for(sizes, budget)
        if cap >= max(sizes):
            break
        out = list(messages)
        for i, j, size in results:
            if size > cap:
                part = messages[i].parts[j]
                assert isinstance(part, ToolResultPart)
                text = shorten_text(part.content, size, cap, part.name or "tool", recall_tool)
                shortened = replace(part, content=text)
                out[i] = replace(out[i], parts=(*out[i].parts[:j], shortened, *out[i].parts[j + 1 :]))
        total = sum(map(count, out))
        if total <= limit:
            break
        budget -= total - limit  # the estimate from characters was short: ask for the difference too
    if total >= before:
        return messages
    changed = sum(
        1
        for i, m in enumerate(out)
        if m is not messages[i]
        for a, b in zip(m.parts, messages[i].parts)
        if a is not b
    )
    notes.replaced += changed
    notes.details.append(
        f"the final request alone is over the budget: cut {before - total:,} tokens out of the middle of "
        f"{changed} of its tool result(s) ({before:,} -> {total:,} tokens; limit {limit:,})"
    )
    return out


def _cap_for(sizes: list[int], budget: int) -> int:
    """The largest per-result size `c` with `sum(min(s, c)) <= budget` (at least `_MIN_KEEP`)."""
    low, high = _MIN_KEEP, max(sizes)
    if sum(min(s, low) for s in sizes) > budget:
        return low
    while low < high:
        mid = (low + high + 1) // 2
        if sum(min(s, mid) for s in sizes) <= budget:
            low = mid
        else:
            high = mid - 1
    return low


def shorten_text(text: str, tokens: int, keep: int, tool: str, recall_tool: str | None = None) -> str:
    """`text` (`tokens` long) cut to about `keep` tokens: its head and tail, and a line between
    them saying how much was cut, and with `recall_tool`, the call that returns all of it."""
    note_tokens = 40
    kept_chars = max(0, int(len(text) * max(keep - note_tokens, 0) / max(tokens, 1)))
    head = int(kept_chars * _HEAD_SHARE)
    tail = kept_chars - head
    # Cut at line ends where there are some nearby: a half line reads worse than a shorter one.
    head_end = text.rfind("\n", max(0, head - 200), head)
    head_end = head if head_end <= 0 else head_end
    tail_start = text.find("\n", len(text) - tail, min(len(text), len(text) - tail + 200))
    tail_start = len(text) - tail if tail_start < 0 else tail_start + 1
    if tail_start <= head_end:
        return text
    cut = max(tokens - keep, 0)
    how = (
        _AGAIN if recall_tool is None else _RECALL.format(call=recall_call(recall_tool, recall_handle(text)))
    )
    return text[:head_end] + _CUT_NOTE.format(cut=cut, tool=tool, how=how) + text[tail_start:]
