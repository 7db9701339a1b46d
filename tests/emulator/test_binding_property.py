"""The prefix check as a property: for any conversation and any edit, the emulator rejects exactly the
requests the binding rule (R13) says the API rejects, and `drop_block` drops exactly the invalid blocks."""

from __future__ import annotations

import copy
from typing import Any

import anthropic
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.emulator import NON_BINDING_ANTHROPIC_MODEL, ProviderEmulator, ToolCall, Turn
from tests.emulator.anthropic_api import BINDING_BETA
from tests.strategies import examples

BINDING = "claude-sonnet-5-5"
TOOLS = [{"name": "read", "input_schema": {"type": "object"}}]
DROP = {"type": "adaptive", "block_binding": {"prefix_mismatch_behavior": "drop_block"}}

turns = st.lists(
    st.tuples(
        st.integers(0, 2),  # thinking blocks
        st.booleans(),  # redacted
        st.integers(1, 3),  # parallel calls
        st.booleans(),  # visible text
    ),
    min_size=1,
    max_size=4,
)


def _conversation(plan: list[tuple[int, bool, int, bool]]) -> tuple[ProviderEmulator, list[dict[str, Any]]]:
    """Play `plan` (one tool turn per entry) through the SDK; returns the final request's messages."""
    step = 0

    def script(request: Any) -> Turn:
        thinking, redacted, calls, text = plan[step]
        return Turn(
            thinking=[f"thought {step}.{i}" for i in range(thinking)],
            redacted=redacted,
            text=f"step {step}" if text else None,
            tool_calls=[ToolCall("read", {"n": k}) for k in range(calls)],
        )

    emulator = ProviderEmulator(script)
    client = emulator.anthropic_client()
    messages: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    for step in range(len(plan)):  # noqa: B007 - the script reads `step`
        reply = client.messages.create(model=BINDING, max_tokens=512, tools=TOOLS, messages=messages)
        messages.append(
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]}
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": b.id, "content": f"result {b.id}"}
                    for b in reply.content
                    if b.type == "tool_use"
                ],
            }
        )
    assert emulator.rejected == []
    return emulator, messages


def _thinking_after(messages: list[dict[str, Any]], k: int) -> list[str]:
    return [
        f"messages.{i}.content.{j}"
        for i, m in enumerate(messages)
        if i > k and m["role"] == "assistant"
        for j, b in enumerate(m["content"])
        if b["type"] in ("thinking", "redacted_thinking")
    ]


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=turns, data=st.data())
def test_an_edit_invalidates_exactly_the_thinking_after_it(
    plan: list[tuple[int, bool, int, bool]], data: Any
) -> None:
    emulator, messages = _conversation(plan)
    client = emulator.anthropic_client()
    k = data.draw(st.sampled_from([i for i, m in enumerate(messages) if m["role"] == "user"]), label="edited")
    edited = copy.deepcopy(messages)
    first = edited[k]["content"]
    if isinstance(first, str):
        edited[k]["content"] = first + " (edited)"
    else:
        first[0]["content"] = "[cleared]"
    invalid = _thinking_after(edited, k)

    def send(history: list[dict[str, Any]], **kwargs: Any) -> Any:
        return client.beta.messages.create(
            model=BINDING, max_tokens=512, tools=TOOLS, messages=history, **kwargs
        )

    if invalid:
        try:
            send(edited)
            raise AssertionError("an edit before thinking was accepted")
        except anthropic.BadRequestError as error:
            body = error.body
            assert isinstance(body, dict)
            assert body["error"]["message"].startswith(f"{invalid[0]}: Invalid signature in thinking block.")
    else:
        assert send(edited)
    dropped = send(edited, thinking=DROP, betas=[BINDING_BETA])
    reported = [
        t if isinstance(t, dict) else t.model_dump()
        for t in getattr(dropped, "input_transformations", None) or []
    ]
    assert [t["path"] for t in reported] == invalid
    # What R13 asks of a client: drop the thinking after the edit, keep the rest byte for byte.
    for message in edited[k + 1 :]:
        if message["role"] == "assistant":
            message["content"] = [
                b for b in message["content"] if b["type"] not in ("thinking", "redacted_thinking")
            ]
    assert send(edited)
    # A model without binding takes the edited history with every thinking block still in it.
    assert client.messages.create(
        model=NON_BINDING_ANTHROPIC_MODEL, max_tokens=512, tools=TOOLS, messages=_with_thinking(messages, k)
    )


def _with_thinking(messages: list[dict[str, Any]], k: int) -> list[dict[str, Any]]:
    edited = copy.deepcopy(messages)
    edited[k]["content"] = (
        "changed"
        if isinstance(edited[k]["content"], str)
        else [
            {**edited[k]["content"][0], "content": "[cleared]"},
            *edited[k]["content"][1:],
        ]
    )
    return edited
