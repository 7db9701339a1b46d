"""historykit's own stored form of a LangChain message: exact round trips of plain data, the
serializer for anything else, and rows that build nothing but LangChain's message classes."""

from __future__ import annotations

import datetime
import enum
import sqlite3
from typing import Any

import ormsgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from historykit.checkpointers import SQLModelSaver
from historykit.checkpointers._message_form import MESSAGE_ENCODING, pack_message, unpack_message
from historykit.checkpointers._serde import RowCodec, default_serializer
from historykit.errors import CorruptRowError
from tests.checkpointers.test_saver_storage import Thread

plain = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text() | st.binary(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)


def _same(a: BaseMessage, b: BaseMessage) -> bool:
    return (
        type(a) is type(b)
        and a.__dict__ == b.__dict__
        and a.__pydantic_extra__ == b.__pydantic_extra__
        and a.model_dump() == b.model_dump()
    )


@given(content=st.text(), kwargs=st.dictionaries(st.text(max_size=5), plain, max_size=3), artifact=plain)
def test_plain_messages_come_back_exactly_and_share_nothing(
    content: str, kwargs: dict[str, Any], artifact: Any
) -> None:
    for message in (
        HumanMessage(content, id="h", additional_kwargs=kwargs),
        AIMessage(content, tool_calls=[{"name": "t", "args": kwargs, "id": "c"}], response_metadata=kwargs),
        ToolMessage(content, tool_call_id="c", artifact=artifact, status="error"),
        SystemMessage([{"type": "text", "text": content}], extra_field=kwargs),
    ):
        data = pack_message(message)
        assert data is not None
        first, second = unpack_message(data), unpack_message(data)
        assert _same(first, message) and first == message
        first.additional_kwargs["edited"] = True
        assert "edited" not in second.additional_kwargs and "edited" not in message.additional_kwargs


class Colour(str, enum.Enum):
    RED = "red"


class Text(str):
    pass


class MyMessage(HumanMessage):
    pass


@pytest.mark.parametrize(
    "message",
    [
        ToolMessage("x", tool_call_id="c", artifact=(1, 2)),
        ToolMessage("x", tool_call_id="c", artifact=datetime.datetime(2026, 1, 1)),
        ToolMessage("x", tool_call_id="c", artifact={1: "int key"}),
        HumanMessage("x", additional_kwargs={"colour": Colour.RED}),
        HumanMessage("x", additional_kwargs={"text": Text("sub")}),
        MyMessage("a subclass"),
    ],
    ids=["tuple", "datetime", "int-key", "enum", "str-subclass", "subclass"],
)
def test_anything_but_plain_data_keeps_the_serializer(message: BaseMessage, sqlite_url: str) -> None:
    assert pack_message(message) is None
    saver = SQLModelSaver(sqlite_url)
    thread = Thread(saver)
    config = thread.put([HumanMessage("plain", id="p"), message])
    encodings = [
        row[0]
        for row in sqlite3.connect(sqlite_url.removeprefix("sqlite:///")).execute(
            "SELECT encoding FROM historykit_message ORDER BY seq"
        )
    ]
    assert encodings[0].startswith(MESSAGE_ENCODING) and not encodings[1].startswith(MESSAGE_ENCODING)
    cold = SQLModelSaver(sqlite_url, cached_threads=0)
    loaded = cold.get_tuple(config)
    assert loaded is not None
    read = loaded.checkpoint["channel_values"]["messages"][1]
    serde = default_serializer()  # what it was before: LangGraph's round trip (a tuple as a list, ...)
    assert _same(read, serde.loads_typed(serde.dumps_typed(message)))


def test_an_int_beyond_64_bits_is_not_plain() -> None:
    assert pack_message(ToolMessage("x", tool_call_id="c", artifact=2**70)) is None


def test_a_row_names_only_langchain_message_classes() -> None:
    codec = RowCodec(default_serializer())
    where = "test row"
    for payload in (
        ormsgpack.packb(["os.system", {"content": "x"}, {}]),
        ormsgpack.packb(["BaseMessage", {"content": "x"}, {}]),
        ormsgpack.packb(["HumanMessage", ["not", "a", "dict"], {}]),
        ormsgpack.packb({"HumanMessage": {}}),
        ormsgpack.packb(["HumanMessage", {"content": ormsgpack.Ext(1, b"x")}, {}]),
        b"\xc1 not msgpack",
    ):
        with pytest.raises(CorruptRowError, match=where):
            codec.loads(MESSAGE_ENCODING, payload, where=where)


def test_rows_decoded_together_name_the_bad_one() -> None:
    """A cold read decodes its rows in one pass: good rows (compressed or not, and one in the
    serializer's form) come back as written, and a bad row is named as the general path names it."""
    codec = RowCodec(default_serializer())
    long = ToolMessage("source text " * 100, tool_call_id="c", id="t1")
    messages = [HumanMessage("hi", id="h1"), long, HumanMessage("x", additional_kwargs={"t": (1, 2)})]
    rows = []
    for message in messages:
        packed = codec.dumps_message(message)
        encoding, data = (packed[1], packed[2]) if packed is not None else codec.dumps(message)
        rows.append((encoding, data))
    assert rows[1][0].endswith(";zstd") and not rows[2][0].startswith(MESSAGE_ENCODING)
    decoded = codec.loads_messages(rows, lambda i: f"row {i}")
    assert [message for message, _, _ in decoded][:2] == messages[:2]
    assert decoded[2][0].additional_kwargs == {"t": [1, 2]}  # LangGraph's round trip of a tuple
    assert [decode is None for _, decode, _ in decoded] == [True, True, False]
    again = [(decode or unpack_message)(payload) for _, decode, payload in decoded]
    assert again == [message for message, _, _ in decoded]
    assert all(a is not b for a, (b, _, _) in zip(again, decoded, strict=True))
    for bad in ((rows[1][0], rows[1][1][:-3]), (MESSAGE_ENCODING, b"\xc1 not msgpack"), ("pickle", b"x")):
        with pytest.raises(CorruptRowError, match="row 1"):
            codec.loads_messages([rows[0], bad], lambda i: f"row {i}")


def test_a_row_of_other_fields_is_validated() -> None:
    # Another LangChain version's fields (one missing, one unknown): built through validation.
    data = ormsgpack.packb(["HumanMessage", {"content": "hi", "id": "h1", "novel": 1}, {}])
    message = unpack_message(data)
    assert type(message) is HumanMessage and message.content == "hi" and message.id == "h1"
    with pytest.raises(ValueError):
        unpack_message(ormsgpack.packb(["HumanMessage", {"content": 5}, {}]))


def test_a_serializer_of_its_own_writes_the_messages() -> None:
    class Own(JsonPlusSerializer):
        def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
            return super().dumps_typed(obj)

    message = HumanMessage("hi", id="h")
    assert RowCodec(Own(allowed_msgpack_modules=None)).dumps_message(message) is None
    packed = RowCodec(default_serializer()).dumps_message(message)
    assert packed is not None and packed[1] == MESSAGE_ENCODING and packed[0] == message
