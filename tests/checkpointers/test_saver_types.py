"""State types round-trip with the default serializer, nothing read executes code, and encrypted
storage is strict: on a SQLite file and on PostgreSQL, through a real LangGraph graph."""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import os
from pathlib import Path
from typing import Any, TypedDict

import ormsgpack
import pytest
import sqlalchemy as sa
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import EXT_CONSTRUCTOR_POS_ARGS, EXT_CONSTRUCTOR_SINGLE_ARG
from langgraph.graph import START, StateGraph
from pydantic import BaseModel

from historykit.checkpointers import SQLModelSaver
from historykit.checkpointers._database import CorruptRowError, create_engine
from historykit.checkpointers._serde import RefusedTypeError, StateSerializer


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class User(BaseModel):
    name: str
    color: Color


@dataclasses.dataclass
class Budget:
    limit: int
    spent: int


class State(TypedDict):
    user: User
    budget: Budget
    color: Color
    turns: int


def _graph(saver: SQLModelSaver) -> Any:
    def step(state: State) -> dict[str, Any]:
        # Crashes with AttributeError when a type came back as a dict or a str.
        return {
            "budget": Budget(state["budget"].limit, state["budget"].spent + len(state["user"].name)),
            "color": Color.BLUE if state["color"] is Color.RED else Color.RED,
            "turns": state["turns"] + 1,
        }

    builder = StateGraph(State)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    return builder.compile(checkpointer=saver)


def test_state_types_round_trip_with_the_default_serializer(database_url: str) -> None:
    config = {"configurable": {"thread_id": "types"}}
    _graph(SQLModelSaver(database_url)).invoke(
        {"user": User(name="ada", color=Color.RED), "budget": Budget(10, 0), "color": Color.RED, "turns": 0},
        config,
    )
    fresh = _graph(SQLModelSaver(database_url))  # a new process: nothing cached
    values = fresh.get_state(config).values
    assert values["user"] == User(name="ada", color=Color.RED)
    assert values["budget"] == Budget(10, 3)
    assert values["color"] is Color.BLUE
    fresh.invoke({"turns": values["turns"]}, config)  # the next turn runs on the restored types
    assert fresh.get_state(config).values["budget"] == Budget(10, 6)


def _set_blob(url: str, channel: str, data: bytes, encoding: str = "msgpack") -> None:
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(
                sa.text("UPDATE historykit_blob SET encoding = :e, data = :d WHERE channel = :c"),
                {"e": encoding, "d": data, "c": channel},
            )
    finally:
        engine.dispose()


def _ext(code: int, *parts: Any) -> ormsgpack.Ext:
    return ormsgpack.Ext(code, ormsgpack.packb(list(parts)))


def test_a_row_that_calls_os_system_is_refused(database_url: str, tmp_path: Path) -> None:
    config = {"configurable": {"thread_id": "attack"}}
    graph = _graph(SQLModelSaver(database_url))
    graph.invoke(
        {"user": User(name="a", color=Color.RED), "budget": Budget(1, 0), "color": Color.RED, "turns": 0},
        config,
    )
    canary = tmp_path / "ran"
    _set_blob(
        database_url,
        "turns",
        ormsgpack.packb(_ext(EXT_CONSTRUCTOR_SINGLE_ARG, "os", "system", f"touch {canary}")),
    )
    with pytest.raises(
        RefusedTypeError, match=r"os\.system.*not a pydantic model, dataclass or Enum.*allowed_types"
    ):
        _graph(SQLModelSaver(database_url)).get_state(config)
    assert not canary.exists()
    # A module a row names is never imported.
    _set_blob(
        database_url, "turns", ormsgpack.packb(_ext(EXT_CONSTRUCTOR_POS_ARGS, "antigravity", "geohash", [1]))
    )
    with pytest.raises(RefusedTypeError, match=r"antigravity\.geohash, whose module is not imported"):
        _graph(SQLModelSaver(database_url)).get_state(config)


def test_declared_types_only_when_asked(sqlite_url: str) -> None:
    config = {"configurable": {"thread_id": "declared"}}
    _graph(SQLModelSaver(sqlite_url)).invoke(
        {"user": User(name="a", color=Color.RED), "budget": Budget(1, 0), "color": Color.RED, "turns": 0},
        config,
    )
    strict = SQLModelSaver(sqlite_url, serde=StateSerializer(state_types="declared"))
    with pytest.raises(RefusedTypeError, match=r"test_saver_types\.\w+.*StateSerializer\(allowed_types="):
        _graph(strict).get_state(config)
    # What LangGraph passes in strict mode (`with_allowlist`) is built.
    allowed = strict.with_allowlist([User, Budget, Color])
    assert _graph(allowed).get_state(config).values["budget"] == Budget(1, 1)


class _Cipher:
    """A toy stream cipher (SHA-256 keystream): enough to tell encrypted rows from plain ones."""

    def __init__(self, key: bytes) -> None:
        self.key = key

    def _stream(self, nonce: bytes, size: int) -> bytes:
        out, counter = b"", 0
        while len(out) < size:
            out += hashlib.sha256(self.key + nonce + counter.to_bytes(8, "big")).digest()
            counter += 1
        return out[:size]

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        nonce = os.urandom(16)
        return "toy", nonce + bytes(a ^ b for a, b in zip(plaintext, self._stream(nonce, len(plaintext))))

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        nonce, body = ciphertext[:16], ciphertext[16:]
        return bytes(a ^ b for a, b in zip(body, self._stream(nonce, len(body))))


def test_encrypted_storage_is_strict(database_url: str, tmp_path: Path) -> None:
    # As the README suggests: LangGraph's EncryptedSerializer, whose inner serializer is LangGraph's
    # permissive default.
    cipher = _Cipher(b"k" * 32)
    saver = SQLModelSaver(database_url, serde=EncryptedSerializer(cipher))
    config = {"configurable": {"thread_id": "secret"}}
    graph = _graph(saver)
    graph.invoke(
        {"user": User(name="a", color=Color.RED), "budget": Budget(1, 0), "color": Color.RED, "turns": 0},
        config,
    )
    assert _graph(SQLModelSaver(database_url, serde=EncryptedSerializer(cipher))).get_state(config).values[
        "user"
    ] == User(name="a", color=Color.RED)

    canary = tmp_path / "ran"
    attack = ormsgpack.packb(_ext(EXT_CONSTRUCTOR_SINGLE_ARG, "os", "system", f"touch {canary}"))
    # Written by someone without the key: not encrypted, refused.
    _set_blob(database_url, "turns", attack)
    with pytest.raises(CorruptRowError, match=r"is not encrypted \(encoding 'msgpack'\).*refused"):
        _graph(SQLModelSaver(database_url, serde=EncryptedSerializer(cipher))).get_state(config)
    # Encrypted with the key: the inner serializer still never runs code.
    _set_blob(database_url, "turns", cipher.encrypt(attack)[1], encoding="msgpack+toy")
    with pytest.raises(RefusedTypeError, match=r"os\.system"):
        _graph(SQLModelSaver(database_url, serde=EncryptedSerializer(cipher))).get_state(config)
    assert not canary.exists()


def test_messages_still_decode_strictly(sqlite_url: str) -> None:
    saver = SQLModelSaver(sqlite_url)
    from langgraph.graph import MessagesState

    builder = StateGraph(MessagesState)
    builder.add_node("n", lambda s: {})
    builder.add_edge(START, "n")
    graph = builder.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "m"}}
    graph.invoke({"messages": [HumanMessage("hi", id="h")]}, config)
    fresh = builder.compile(
        checkpointer=SQLModelSaver(sqlite_url, serde=StateSerializer(state_types="declared"))
    )
    assert fresh.get_state(config).values["messages"][0].content == "hi"


def test_a_model_defined_in_a_function_comes_back_as_its_fields(database_url: str) -> None:
    """As with LangGraph's own reader (its `test_in_one_fan_out_state_graph_waiting_edge_custom_state_
    class_pydantic_input`): a pydantic model whose class cannot be found by module and name (defined
    inside a function) is read back as plain data, not refused, and nothing is imported or called."""

    class Inner(BaseModel):
        hello: str

    # The functional form: the annotations are the classes themselves, not names to resolve later.
    local = TypedDict("local", {"inner": Inner, "turns": int})  # type: ignore[misc]  # noqa: UP013

    def step(state: dict[str, Any]) -> dict[str, Any]:
        return {"turns": state["turns"] + 1}

    builder = StateGraph(local)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    graph = builder.compile(checkpointer=SQLModelSaver(database_url))
    config = {"configurable": {"thread_id": "local-model"}}
    graph.invoke({"inner": Inner(hello="world"), "turns": 0}, config)
    fresh = builder.compile(checkpointer=SQLModelSaver(database_url))
    values = fresh.get_state(config).values
    assert values["turns"] == 1
    assert values["inner"] == {"hello": "world"} or values["inner"] == Inner(hello="world")
