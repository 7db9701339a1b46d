"""`ClearMedia`: the newest images stay, older ones become placeholders; what is never touched;
both modes; random screenshot sessions."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from historykit import pin
from historykit._messages import (
    MediaPart,
    Message,
    Part,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    payload_digest,
)
from historykit._validity import check_neutral, final_request_start
from historykit.errors import InvalidArgumentError
from historykit.processors import ClearMedia
from historykit.processors._turns import is_user_request

from ..strategies import examples
from .support import (
    assert_idempotent,
    assert_in_place_edit_rules,
    assert_modes_agree,
    context,
    replay_both_modes,
    tokens,
)


def shot(n: int, size: int = 100_000, media_type: str = "image/png") -> MediaPart:
    return MediaPart(media_type, size=size, digest=payload_digest(f"screenshot {n}"))


def step(n: int, *, size: int = 100_000, text: str = "", media_type: str = "image/png") -> list[Message]:
    """The model takes screenshot `n`; the tool returns it (after `text`, when given)."""
    call = ToolCallPart(f"c{n}", "screenshot", {"url": f"https://example.com/page/{n}"})
    result = ToolResultPart(call.id, "screenshot", text, media=(shot(n, size, media_type),))
    return [Message("assistant", (TextPart(f"Step {n}."), call)), Message("tool", (result,))]


def session(steps: int, *, user_image: bool = False) -> list[Message]:
    task: Message = Message.user("Book the cheapest flight to Lisbon.")
    if user_image:
        task = Message("user", (TextPart("Make the page look like this:"), shot(-1, 250_000, "image/jpeg")))
    history = [Message.system("You drive a browser."), task]
    for n in range(steps):
        history += step(n)
    return history


def media_items(messages: list[Message]) -> list[Part]:
    """Every part that is or stood for an image or file: top-level parts and tool-result media."""
    return [
        item
        for msg in messages
        for part in msg.parts
        for item in (part.media if isinstance(part, ToolResultPart) else (part,))
    ]


def images_left(messages: list[Message]) -> list[str]:
    """The digests of the images still in `messages`, in order."""
    return [m.digest for m in media_items(messages) if isinstance(m, MediaPart)]


def placeholders(messages: list[Message]) -> list[str]:
    return [
        t.text
        for t in media_items(messages)
        if isinstance(t, TextPart) and "removed from the request" in t.text
    ]


def test_the_newest_images_stay_and_older_ones_become_placeholders() -> None:
    history = session(8)
    out, notes = ClearMedia(keep=3, batch=1).process(history, context())
    assert images_left(out) == [shot(n).digest for n in (5, 6, 7)]
    assert notes.replaced == 5
    assert placeholders(out)[0] == (
        "[image removed from the request to save context: image/png, 100 KB, returned by "
        "screenshot(url='https://example.com/page/0')]"
    )
    # In place: the same messages, each tool result still answering its call.
    assert [m.role for m in out] == [m.role for m in history]
    assert check_neutral(out) == []
    assert tokens(out) < tokens(history) - 4 * 900


def test_untouched_messages_are_the_same_objects() -> None:
    history = session(6)
    out, _ = ClearMedia(keep=2, batch=1).process(history, context())
    changed = {i for i, (a, b) in enumerate(zip(history, out)) if a is not b}
    # Only the tool messages of the four oldest screenshots were rebuilt.
    assert changed == {3, 5, 7, 9}
    result = out[3].parts[0]
    assert isinstance(result, ToolResultPart) and result.tool_call_id == "c0" and result.content == ""


def test_a_history_without_images_comes_back_as_the_same_list() -> None:
    history = [Message.system("s"), Message.user("task")]
    for n in range(10):
        call = ToolCallPart(f"c{n}", "Read", {"file_path": f"f{n}.py"})
        history += [
            Message("assistant", (call,)),
            Message("tool", (ToolResultPart(call.id, "Read", "x" * 500),)),
        ]
    out, notes = ClearMedia(keep=0, max_bytes=0).process(history, context())
    assert out is history and notes.replaced == 0


def test_no_more_than_keep_images_is_left_alone() -> None:
    history = session(3)
    out, _ = ClearMedia(keep=3, batch=1).process(history, context())
    assert out is history


def test_the_final_request_keeps_its_images_even_beyond_keep() -> None:
    history = session(2)
    # The model asked for three screenshots at once: all three are the request it is to answer.
    calls = [ToolCallPart(f"p{k}", "screenshot", {"url": f"https://example.com/tab/{k}"}) for k in range(3)]
    history.append(Message("assistant", tuple(calls)))
    history += [
        Message("tool", (ToolResultPart(c.id, "screenshot", "", media=(shot(10 + k),)),))
        for k, c in enumerate(calls)
    ]
    out, _ = ClearMedia(keep=1, batch=1).process(history, context())
    assert images_left(out) == [shot(10 + k).digest for k in range(3)]
    assert all(
        a is b for a, b in zip(out[final_request_start(out) :], history[final_request_start(history) :])
    )


def test_the_latest_user_request_keeps_its_image() -> None:
    history = session(6, user_image=True)
    out, _ = ClearMedia(keep=2, batch=1).process(history, context())
    assert images_left(out) == [shot(-1, 250_000, "image/jpeg").digest, shot(4).digest, shot(5).digest]
    assert out[1] is history[1]
    # Once the user writes again, the older request's image counts like any other.
    later = [*history, Message("assistant", (TextPart("Booked."),)), Message.user("Now a hotel.")]
    out, _ = ClearMedia(keep=2, batch=1).process(later, context())
    assert out[1].parts[1] == TextPart(
        "[image removed from the request to save context: image/jpeg, 250 KB, sent by the user]"
    )


def test_pinned_images_messages_and_results_stay() -> None:
    history = session(6)
    history[3] = pin(history[3])  # a pinned message
    res = history[5].parts[0]
    assert isinstance(res, ToolResultPart)
    history[5] = replace(history[5], parts=(replace(res, pinned=True),))  # a pinned tool result
    res = history[7].parts[0]
    assert isinstance(res, ToolResultPart)
    history[7] = replace(history[7], parts=(replace(res, media=(pin(res.media[0]),)),))  # a pinned image
    out, _ = ClearMedia(keep=1, batch=1).process(history, context())
    assert out[3] is history[3] and out[5] is history[5] and out[7] is history[7]
    # Pinned images are not counted: the newest unpinned one stays.
    assert images_left(out) == [shot(n).digest for n in (0, 1, 2, 5)]


def test_max_bytes_removes_big_media_even_among_the_newest() -> None:
    history = session(2)
    history += step(2, size=5_000_000, media_type="application/pdf", text="the invoice")
    history += step(3)
    out, _ = ClearMedia(keep=10, max_bytes=2_000_000).process(history, context())
    result = out[7].parts[0]
    assert isinstance(result, ToolResultPart) and result.content == "the invoice"
    assert result.media == (
        TextPart(
            "[file removed from the request to save context: application/pdf, 5.0 MB, returned by "
            "screenshot(url='https://example.com/page/2')]"
        ),
    )
    assert images_left(out) == [shot(n).digest for n in (0, 1, 3)]


def test_a_big_file_in_the_final_request_stays() -> None:
    history = session(1) + step(1, size=5_000_000)
    out, _ = ClearMedia(keep=10, max_bytes=1_000).process(history, context())
    assert images_left(out) == [shot(1, 5_000_000).digest]


def test_a_url_image_names_its_url() -> None:
    history = [
        Message.system("s"),
        Message("user", (TextPart("Look:"), MediaPart("image/png", source="https://example.com/a.png"))),
        Message("assistant", (TextPart("Seen."),)),
        Message.user("Thanks."),
    ]
    out, _ = ClearMedia(keep=0, batch=1).process(history, context())
    assert out[1].parts[1] == TextPart(
        "[image removed from the request to save context: image/png at https://example.com/a.png, "
        "sent by the user]"
    )


def test_batches_leave_the_request_append_only_in_between() -> None:
    processor = ClearMedia(keep=2, batch=3)
    kept = [len(images_left(processor.process(session(n), context())[0])) for n in range(1, 12)]
    assert kept == [1, 2, 3, 4, 2, 3, 4, 2, 3, 4, 2]
    # The defaults: at least the newest 3, five more removed at once.
    kept = [len(images_left(ClearMedia().process(session(n), context())[0])) for n in range(1, 16)]
    assert kept == [1, 2, 3, 4, 5, 6, 7, 3, 4, 5, 6, 7, 3, 4, 5]


def test_batches_send_the_same_views_in_both_modes() -> None:
    history = session(23, user_image=True)
    out = assert_modes_agree(ClearMedia(), ClearMedia(), history, context())
    assert len(images_left(out)) == 1 + 3  # the task's mockup, and the newest 3 (23 = 3 + 4 x 5)


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("keep", -1, "keep"),
        ("keep", "3", "keep"),
        ("max_bytes", 1.5, "max_bytes"),
        ("batch", 0, "batch must be at least 1"),
    ],
)
def test_bad_options_are_named(option: str, value: object, message: str) -> None:
    with pytest.raises((InvalidArgumentError, TypeError), match=message):
        ClearMedia(**{option: value})  # type: ignore[arg-type]


def test_both_modes_send_the_same_views() -> None:
    history = session(12, user_image=True)
    history += [Message("assistant", (TextPart("Done."),)), Message.user("Check the receipt.")]
    history += step(20) + step(21)
    out = assert_modes_agree(ClearMedia(keep=3, batch=1), ClearMedia(keep=3, batch=1), history, context())
    assert len(images_left(out)) == 3
    assert_idempotent(ClearMedia(keep=3, batch=1), out, context())


# --- random screenshot sessions --------------------------------------------------------------------


@st.composite
def screenshot_sessions(draw: st.DrawFn) -> list[Message]:
    """A task (maybe with an image), then steps: tool calls (one or parallel) whose results carry
    0-2 images or files of random sizes, now and then pinned, and now and then a user turn."""
    history: list[Message] = [Message.system("You drive a browser.")]
    counter = 0

    def media() -> MediaPart:
        nonlocal counter
        counter += 1
        kind = draw(st.sampled_from(("image/png", "image/png", "image/jpeg", "application/pdf")))
        return MediaPart(
            kind,
            size=draw(st.integers(0, 3_000_000)),
            pinned=draw(st.integers(0, 9)) == 0,
            digest=str(counter),
        )

    def user() -> Message:
        parts: tuple[TextPart | MediaPart, ...] = (TextPart(f"request {len(history)}"),)
        return Message("user", parts + tuple(media() for _ in range(draw(st.integers(0, 2)))))

    history.append(user())
    for n in range(draw(st.integers(0, 12))):
        if draw(st.integers(0, 5)) == 0:
            history += [Message("assistant", (TextPart("ok"),)), user()]
            continue
        calls = [
            ToolCallPart(f"c{n}_{k}", "screenshot", {"url": f"u{n}"}) for k in range(draw(st.integers(1, 2)))
        ]
        history.append(Message("assistant", tuple(calls)))
        for call in calls:
            items = tuple(media() for _ in range(draw(st.integers(0, 2))))
            text = draw(st.sampled_from(("", "page loaded")))
            result = ToolResultPart(
                call.id, call.name, text, pinned=draw(st.integers(0, 9)) == 0, media=items
            )
            history.append(Message("tool", (result,)))
    return history


PROPERTY = settings(max_examples=examples(150), deadline=None, suppress_health_check=list(HealthCheck))


@PROPERTY
@given(
    screenshot_sessions(),
    st.integers(0, 4),
    st.one_of(st.none(), st.integers(0, 3_000_000)),
    st.integers(1, 3),
)
def test_random_sessions(history: list[Message], keep: int, max_bytes: int | None, batch: int) -> None:
    processor = ClearMedia(keep=keep, max_bytes=max_bytes, batch=batch)
    out, notes = processor.process(history, context())
    assert_in_place_edit_rules(history, out)
    assert len(out) == len(history)
    final = final_request_start(history)
    latest = max((i for i, m in enumerate(history) if is_user_request(m)), default=-1)
    for index, (before, after) in enumerate(zip(history, out)):
        if before.role == "assistant" or before.pinned or index >= final or index == latest:
            assert after is before
        for a, b in zip(before.parts, after.parts):
            if a.pinned:
                assert a is b
            if isinstance(a, ToolResultPart):
                assert isinstance(b, ToolResultPart) and replace(b, media=a.media) == a
                assert len(a.media) == len(b.media)
                assert all(x is y for x, y in zip(a.media, b.media) if x.pinned)
    # Of the images still open to removal, no more than `keep + batch - 1` stay (none over max_bytes).
    removable = [
        m
        for i, msg in enumerate(out)
        if msg.role != "assistant" and not msg.pinned and i < final and i != latest
        for p in msg.parts
        if not p.pinned
        for m in (p.media if isinstance(p, ToolResultPart) else (p,))
        if isinstance(m, MediaPart) and not m.pinned
    ]
    assert len([m for m in removable if m.media_type.startswith("image")]) <= keep + batch - 1
    if max_bytes is not None:
        assert all(m.size <= max_bytes for m in removable)
    assert notes.replaced == len(placeholders(out))
    assert_idempotent(processor, out, context())


@PROPERTY
@given(screenshot_sessions(), st.integers(0, 3))
def test_random_sessions_in_both_modes(history: list[Message], keep: int) -> None:
    for _ in replay_both_modes(
        ClearMedia(keep=keep, batch=1), ClearMedia(keep=keep, batch=1), history, context()
    ):
        pass


def test_with_recall_a_placeholder_names_the_image_handle() -> None:
    from historykit import Recall
    from historykit._recall import media_handle

    processor = ClearMedia(keep=1, batch=1)
    Recall().install([processor])
    out, _ = processor.process(session(3), context())
    assert placeholders(out)[0] == (
        "[image removed from the request to save context: image/png, 100 KB, returned by "
        f"screenshot(url='https://example.com/page/0'); recall(handle='{media_handle(shot(0))}') "
        "shows it again]"
    )
    assert media_handle(shot(0)) != media_handle(shot(1))


def test_where_no_image_can_be_found_again_recall_is_not_offered() -> None:
    """`install(media=False)`: what an integration does in persistent mode without a store."""
    from historykit import Recall
    from historykit.processors import ClearToolResults

    processor, results = ClearMedia(keep=1, batch=1), ClearToolResults()
    Recall().install([processor, results], media=False)
    assert processor.recall_tool is None and results.recall_tool == "recall"
    out, _ = processor.process(session(3), context())
    assert placeholders(out) and not any("recall" in text for text in placeholders(out))
