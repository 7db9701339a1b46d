"""How the LangGraph saver turns values into `(encoding, bytes)` columns and back, never with pickle.

The saver takes any LangGraph `SerializerProtocol`. The default is `StateSerializer`, LangGraph's
msgpack `JsonPlusSerializer` with a stricter reading: decoding builds LangChain messages and the
types LangGraph deems safe, and the graph's own state types, never anything else. A stored row
names the types it holds; one is built only when it is:
- one of LangGraph's safe types (messages, standard-library values), or a type the graph
  declared (LangGraph passes them through `with_allowlist` when `LANGGRAPH_STRICT_MSGPACK=true`)
  or `allowed_types` lists;
- or (`state_types="loaded"`, the default) a pydantic model, dataclass or Enum whose module this
  process has already imported: the kinds of type a graph's state schema declares, as
  `InMemorySaver` and `SqliteSaver` restore them. No module is ever imported because a row names
  it, no other callable or method is ever called.
Anything else is refused with `RefusedTypeError` naming the type and the setting that allows it,
instead of coming back silently as a dict.

A serializer that may fall back to pickle is refused, and so is a stored pickle. An
`EncryptedSerializer` works, strictly: every row must be encrypted with its cipher (an
unencrypted row is an error, not decoded), and its inner serializer is read as above whatever it
was configured to allow. A message's address (its hash) is computed on its serialized form before
encryption, so identical messages are still stored once.

Example:
    ```python
    codec = RowCodec(default_serializer())
    encoding, data = codec.dumps({"k": 1})
    assert codec.loads(encoding, data, where="example") == {"k": 1}
    ```
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import importlib
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

import ormsgpack
from langgraph.checkpoint.serde import jsonplus
from langgraph.checkpoint.serde._msgpack import SAFE_MSGPACK_TYPES
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from pydantic import BaseModel

from historykit.checkpointers._message_form import MESSAGE_ENCODING, pack_message, unpack_message
from historykit.checkpointers._schema import HASH_CHARS
from historykit.errors import CorruptRowError, InvalidArgumentError, RefusedTypeError

StateTypes = Literal["loaded", "declared"]


def _type_key(typ: type | tuple[str, ...]) -> tuple[str, str]:
    if isinstance(typ, tuple):
        return (typ[0], typ[1])
    return (typ.__module__, typ.__qualname__)


class StateSerializer(JsonPlusSerializer):
    """LangGraph's msgpack serializer, decoding only safe types and the graph's own state types.

    Example:
        ```python
        serde = StateSerializer(allowed_types=[MyState])  # or state_types="loaded" (the default)
        saver = SQLModelSaver("sqlite:///agent.db", serde=serde)
        ```
    """

    def __init__(
        self, *, state_types: StateTypes = "loaded", allowed_types: Iterable[type | tuple[str, ...]] = ()
    ) -> None:
        """Args:
        state_types: `"loaded"` also builds pydantic models, dataclasses and Enums of modules the
            process has imported; `"declared"` builds only safe types and the declared ones.
        allowed_types: more types to build (classes, or `(module, name)`), as `with_allowlist`.
        """
        if state_types not in ("loaded", "declared"):
            raise InvalidArgumentError(f"state_types must be 'loaded' or 'declared', got {state_types!r}")
        super().__init__(pickle_fallback=False, allowed_msgpack_modules=None)
        self.state_types: StateTypes = state_types
        self.allowed_types: frozenset[tuple[str, str]] = frozenset(map(_type_key, allowed_types))
        # LangGraph's strict reader builds the safe types (and what this saver allowed): types are
        # added to its set once they passed `_allowed` below.
        self._granted: set[tuple[str, ...]] = set(self.allowed_types)
        self._safe_hook = jsonplus._create_msgpack_ext_hook(self._granted)

    def with_msgpack_allowlist(self, extra_allowlist: Iterable[tuple[str, ...] | type]) -> StateSerializer:
        """A copy that also builds the graph's declared types (LangGraph calls it in strict mode)."""
        extra = frozenset(map(_type_key, extra_allowlist)) - self.allowed_types
        if not extra:
            return self
        return StateSerializer(state_types=self.state_types, allowed_types=self.allowed_types | extra)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        encoding, payload = data
        if encoding != "msgpack":
            return super().loads_typed(data)
        refused: list[RefusedTypeError] = []

        def hook(code: int, ext: bytes) -> Any:
            try:
                return self._ext(code, ext, hook)
            except RefusedTypeError as exc:  # ormsgpack replaces a hook's exception with its own
                refused.append(exc)
                raise

        try:
            return ormsgpack.unpackb(payload, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)
        except Exception:
            if refused:
                raise refused[0] from None
            raise

    def _ext(self, code: int, ext: bytes, hook: Any) -> Any:
        if code not in (
            jsonplus.EXT_CONSTRUCTOR_SINGLE_ARG,
            jsonplus.EXT_CONSTRUCTOR_POS_ARGS,
            jsonplus.EXT_CONSTRUCTOR_KW_ARGS,
            jsonplus.EXT_PYDANTIC_V2,
        ):
            # Delta snapshots, numpy arrays, safe method calls: LangGraph's strict reader.
            return self._safe_hook(code, ext)
        parts = ormsgpack.unpackb(ext, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)
        module, name, args = parts[0], parts[1], parts[2]
        key = (module, name)
        if key in SAFE_MSGPACK_TYPES or key in self._granted:
            cls = getattr(importlib.import_module(module), name)
        else:
            found = self._state_type(code, module, name)
            if found is None:
                # As LangGraph's reader: a model whose class cannot be found (defined inside a
                # function) comes back as its fields, plain data.
                return args
            cls = found
            self._granted.add(key)
        if code == jsonplus.EXT_CONSTRUCTOR_SINGLE_ARG:
            return cls(args)
        if code == jsonplus.EXT_CONSTRUCTOR_POS_ARGS:
            if key == ("langgraph.types", "Send"):
                return jsonplus._send_from_args(args)
            return cls(*args)
        if code == jsonplus.EXT_CONSTRUCTOR_KW_ARGS:
            return cls(**args)
        try:
            return cls(**args)
        except Exception:  # as LangGraph: a model that no longer validates its stored fields
            return cls.model_construct(**args)

    def _state_type(self, code: int, module: str, name: str) -> type | None:
        """The class a row names, when it is a state type of an imported module; `None` for a
        pydantic model or dataclass its imported module does not hold at top level (a class defined
        in a function); else refused."""
        where = f"{module}.{name}"
        allow = (
            f"list it in historykit.checkpointers.StateSerializer(allowed_types=[{where}]) and pass it "
            "as the saver's serde "
            "(or run LangGraph with LANGGRAPH_STRICT_MSGPACK=true, which declares the graph's types)"
        )
        if self.state_types != "loaded":
            raise RefusedTypeError(
                f"the stored value names the type {where}, which is not a type LangGraph deems safe "
                f"nor one declared by the graph: to build it, {allow}"
            )
        loaded = sys.modules.get(module)
        cls = getattr(loaded, name, None) if loaded is not None else None
        kinds = {
            jsonplus.EXT_CONSTRUCTOR_SINGLE_ARG: isinstance(cls, type) and issubclass(cls, enum.Enum),
            jsonplus.EXT_CONSTRUCTOR_KW_ARGS: isinstance(cls, type) and dataclasses.is_dataclass(cls),
            jsonplus.EXT_PYDANTIC_V2: isinstance(cls, type) and issubclass(cls, BaseModel),
        }
        if cls is None and loaded is not None and code != jsonplus.EXT_CONSTRUCTOR_SINGLE_ARG:
            return None
        if cls is None:
            raise RefusedTypeError(
                f"the stored value names the type {where}, whose module is not imported: the saver "
                f"never imports a module a row names; import it first, or {allow}"
            )
        if not kinds.get(code, False):
            raise RefusedTypeError(
                f"the stored value asks to call {where}, which is not a pydantic model, dataclass or "
                f"Enum (the state types the saver builds): refused; if it is yours, {allow}"
            )
        assert isinstance(cls, type)
        return cls


def default_serializer() -> StateSerializer:
    """Safe types and the graph's own state types; never pickle (see `StateSerializer`)."""
    return StateSerializer()


def _refuse_pickle(serde: SerializerProtocol) -> None:
    inner = serde.serde if isinstance(serde, EncryptedSerializer) else serde
    if isinstance(inner, JsonPlusSerializer) and inner.pickle_fallback:
        raise InvalidArgumentError(
            "historykit stores nothing with pickle (decoding a pickle can run code): "
            "pass a JsonPlusSerializer with pickle_fallback=False"
        )


def _is_pickle(encoding: str) -> bool:
    return encoding == "pickle" or encoding.startswith("pickle+")


_MSGPACK_DEPTH = 200
"""Nesting that msgpack (ormsgpack) may refuse: it stops at 255 levels, the envelope included."""


def _depth(value: Any, limit: int) -> int:
    """How deeply `value` nests lists, dicts and models (counted up to `limit`), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if deepest >= limit:
            return deepest
        if isinstance(item, BaseModel):
            item = item.__dict__
        if isinstance(item, dict):
            stack.extend((child, level + 1) for child in item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend((child, level + 1) for child in item)
    return deepest


def _unstorable(obj: Any, exc: BaseException) -> Exception:
    """The error for a value the serializer cannot write, saying why when it can tell."""
    depth = _depth(obj, _MSGPACK_DEPTH)
    if depth >= _MSGPACK_DEPTH:
        return ValueError(
            f"cannot store a {type(obj).__name__}: it nests lists or dicts {depth} or more levels deep, "
            "deeper than msgpack encodes (flatten it, or store it as a JSON string)"
        )
    return TypeError(f"cannot store a {type(obj).__name__}: {type(exc).__name__}: {exc}")


def _reader_for(serde: SerializerProtocol) -> SerializerProtocol:
    """What decodes stored values: a LangGraph msgpack serializer is read strictly whatever it
    allows (`StateSerializer`, keeping the types it lists); another serializer as it is."""
    if isinstance(serde, StateSerializer) or not isinstance(serde, JsonPlusSerializer):
        return serde
    listed = serde._allowed_msgpack_modules
    keys = [key for key in listed if len(key) >= 2] if isinstance(listed, (set, frozenset)) else []
    return StateSerializer(allowed_types=keys)


COMPRESS_FROM = 256
"""Messages serialized to at least this many bytes are stored compressed (when that is smaller)."""
ZSTD_SUFFIX = ";zstd"
"""Appended to a row's `encoding` when its bytes are Zstandard-compressed (older rows: never)."""
_CODERS = threading.local()


def _zstd() -> Any:
    """This thread's Zstandard compressor (a compressor is not to be shared between threads)."""
    compressor = getattr(_CODERS, "compressor", None)
    if compressor is None:
        import zstandard

        compressor = _CODERS.compressor = zstandard.ZstdCompressor(level=3)
    return compressor


def _unzstd() -> Any:
    decompressor = getattr(_CODERS, "decompressor", None)
    if decompressor is None:
        import zstandard

        decompressor = _CODERS.decompressor = zstandard.ZstdDecompressor()
    return decompressor


class RowCodec:
    """A serializer bound to the saver, with hashing and clear errors for undecodable rows."""

    __slots__ = ("_cipher", "_own_form", "_plain", "_reader", "serde")

    def __init__(self, serde: SerializerProtocol) -> None:
        _refuse_pickle(serde)
        self.serde = serde
        if isinstance(serde, EncryptedSerializer):
            self._plain: SerializerProtocol = serde.serde
            self._cipher: Any = serde.cipher
        else:
            self._plain = serde
            self._cipher = None
        self._reader = _reader_for(self._plain)
        # Messages are written in historykit's own form when the serializer writes values as
        # LangGraph's does; a serializer that changes that (its own `dumps_typed`) writes them.
        self._own_form = (
            isinstance(self._plain, JsonPlusSerializer)
            and type(self._plain).dumps_typed is JsonPlusSerializer.dumps_typed
        )

    def dumps(self, obj: Any) -> tuple[str, bytes]:
        try:
            encoding, data = self.serde.dumps_typed(obj)
        except (TypeError, ValueError, RecursionError) as exc:
            raise _unstorable(obj, exc) from exc
        return encoding, data

    def dumps_hashed(self, obj: Any) -> tuple[str, bytes, str]:
        """Encoding, stored bytes, and the SHA-256 of the unencrypted serialized form (a message:
        compressed with Zstandard when that makes it smaller, then encrypted when the serializer
        encrypts; the hash is of the plain form, so a message is found whatever its storage)."""
        try:
            encoding, plain = self._plain.dumps_typed(obj)
        except (TypeError, ValueError, RecursionError) as exc:
            raise _unstorable(obj, exc) from exc
        return self._stored(encoding, plain)

    def dumps_message(self, message: Any) -> tuple[Any, str, bytes, str] | None:
        """`(form, encoding, stored bytes, hash)` of a LangChain message in historykit's own form
        (`_message_form`), `form` being a new object decoded from those very bytes (the private
        copy the saver's cache compares the message with); `None` when the message does not fit
        that form, or the saver's serializer writes values its own way (the caller serializes it with
        `dumps_hashed`)."""
        plain = pack_message(message) if self._own_form else None
        if plain is None:
            return None
        return (unpack_message(plain), *self._stored(MESSAGE_ENCODING, plain))

    def message_digest(self, message: Any) -> str:
        """The hash `dumps_message` gives the message when it fits historykit's form, else the one
        of `dumps_hashed`: the one way a message is addressed, whichever path computes it."""
        plain = pack_message(message) if self._own_form else None
        if plain is not None:
            return self._digest(MESSAGE_ENCODING, plain)
        return self.dumps_hashed(message)[2]

    @staticmethod
    def _digest(encoding: str, plain: bytes) -> str:
        return hashlib.sha256(encoding.encode() + b"\0" + plain).hexdigest()[:HASH_CHARS]

    def _stored(self, encoding: str, plain: bytes) -> tuple[str, bytes, str]:
        digest = self._digest(encoding, plain)
        stored_encoding, stored = encoding, plain
        if len(plain) >= COMPRESS_FROM:
            packed = _zstd().compress(plain)
            if len(packed) < len(plain):
                stored_encoding, stored = encoding + ZSTD_SUFFIX, packed
        if self._cipher is None:
            return stored_encoding, stored, digest
        cipher_name, ciphertext = self._cipher.encrypt(stored)
        return f"{stored_encoding}+{cipher_name}", ciphertext, digest

    def loads(self, encoding: str, data: bytes | None, *, where: str) -> Any:
        """Decode a stored value; `CorruptRowError` naming `where` when it cannot be decoded (a
        pickle, a row not encrypted when the saver encrypts, a type it does not build)."""
        return self._decode(*self._plain_payload(encoding, data, where=where), where=where)

    def _decode(self, encoding: str, payload: bytes, *, where: str) -> Any:
        if encoding == MESSAGE_ENCODING:
            return self._unpack(payload, where)
        try:
            return self._reader.loads_typed((encoding, payload))
        except RefusedTypeError as exc:
            raise RefusedTypeError(f"{where}: {exc}") from None
        except Exception as exc:
            raise CorruptRowError(
                f"{where} cannot be decoded (encoding {encoding!r}): {type(exc).__name__}: {exc}"
            ) from exc

    def loads_message(
        self, encoding: str, data: bytes | None, *, where: str
    ) -> tuple[Any, Callable[[bytes], Any] | None, bytes]:
        """A stored message, how to decode it again, and the bytes to decode: `decode(payload)` is a
        new object equal to it; `decode` is `None` when the row is in historykit's own form
        (`unpack_message(payload)`, and `pack_message` of an unchanged message gives `payload`)."""
        plain_encoding, payload = self._plain_payload(encoding, data, where=where)
        if plain_encoding == MESSAGE_ENCODING:
            return self._unpack(payload, where), None, payload
        decode = functools.partial(self._decode, plain_encoding, where=where)
        return decode(payload), decode, payload

    def loads_messages(
        self, rows: Sequence[tuple[str, bytes | None]], where: Callable[[int], str]
    ) -> list[tuple[Any, Callable[[bytes], Any] | None, bytes]]:
        """`loads_message` of each `(encoding, data)` row; `where(i)` names row `i` in an error.

        A cold read decodes thousands of rows: the ones in historykit's own form (compressed or
        not, unencrypted) skip the general path's per-row steps (the error text, the pickle and
        cipher checks); any other row, or one that fails to decode here, takes the general path,
        which says what is wrong with it."""
        out: list[tuple[Any, Callable[[bytes], Any] | None, bytes]] = []
        own_zstd = MESSAGE_ENCODING + ZSTD_SUFFIX
        own_forms = (own_zstd, MESSAGE_ENCODING)
        decompress = _unzstd().decompress if self._cipher is None else None
        for i, (encoding, data) in enumerate(rows):
            if decompress is not None and data is not None and encoding in own_forms:
                try:
                    payload: bytes = decompress(data) if encoding == own_zstd else data
                    out.append((unpack_message(payload), None, payload))
                    continue
                except Exception:  # the general path below reports it, naming the row
                    pass
            out.append(self.loads_message(encoding, data, where=where(i)))
        return out

    @staticmethod
    def _unpack(payload: bytes, where: str) -> Any:
        try:
            return unpack_message(payload)
        except Exception as exc:
            raise CorruptRowError(
                f"{where} cannot be decoded (encoding {MESSAGE_ENCODING!r}): {type(exc).__name__}: {exc}"
            ) from exc

    def _plain_payload(self, encoding: str, data: bytes | None, *, where: str) -> tuple[str, bytes]:
        """The serializer's encoding and bytes of a stored value: decrypted and decompressed."""
        if _is_pickle(encoding):
            raise CorruptRowError(
                f"{where} holds a pickle, which historykit never writes and refuses to load "
                "(unpickling can run arbitrary code)"
            )
        payload = data if data is not None else b""
        if self._cipher is not None:
            plain_encoding, encrypted, cipher_name = encoding.partition("+")
            if not encrypted:
                raise CorruptRowError(
                    f"{where} is not encrypted (encoding {encoding!r}) but the saver's serializer "
                    "encrypts: refused (a row written without the key is never decoded)"
                )
            try:
                payload = self._cipher.decrypt(cipher_name, payload)
            except Exception as exc:
                raise CorruptRowError(
                    f"{where} cannot be decrypted (cipher {cipher_name!r}): {type(exc).__name__}: {exc}"
                ) from exc
            encoding = plain_encoding
        if encoding.endswith(ZSTD_SUFFIX):
            try:
                payload = _unzstd().decompress(payload)
            except Exception as exc:
                raise CorruptRowError(
                    f"{where} cannot be decompressed (encoding {encoding!r}): {type(exc).__name__}: {exc}"
                ) from exc
            encoding = encoding[: -len(ZSTD_SUFFIX)]
        return encoding, payload
