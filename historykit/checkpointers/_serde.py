"""How the LangGraph saver turns values into `(encoding, bytes)` columns and back, never with pickle.

The saver takes any LangGraph `SerializerProtocol`. The default is LangGraph's msgpack
`JsonPlusSerializer` in strict mode: decoding builds only LangChain messages, a few standard
library types and the types of the graph's own state schema (LangGraph adds those through
`with_allowlist` when it compiles a graph), and never unpickles. A serializer that may fall back
to pickle is refused, and so is a stored pickle. An `EncryptedSerializer` works as is; a message's
address (its hash) is computed on its serialized form before encryption, so identical messages
are still stored once.

Example:
    ```python
    codec = RowCodec(default_serializer())
    encoding, data = codec.dumps({"k": 1})
    assert codec.loads(encoding, data, where="example") == {"k": 1}
    ```
"""

from __future__ import annotations

import hashlib
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from historykit.checkpointers.database import CorruptRowError


def default_serializer() -> JsonPlusSerializer:
    """LangGraph's msgpack serializer, strict: no pickle, only allow-listed types are built."""
    return JsonPlusSerializer(pickle_fallback=False, allowed_msgpack_modules=None)


def _refuse_pickle(serde: SerializerProtocol) -> None:
    inner = serde.serde if isinstance(serde, EncryptedSerializer) else serde
    if isinstance(inner, JsonPlusSerializer) and inner.pickle_fallback:
        raise ValueError(
            "historykit stores nothing with pickle (decoding a pickle can run code): "
            "pass a JsonPlusSerializer with pickle_fallback=False"
        )


def _is_pickle(encoding: str) -> bool:
    return encoding == "pickle" or encoding.startswith("pickle+")


class RowCodec:
    """A serializer bound to the saver, with hashing and clear errors for undecodable rows."""

    __slots__ = ("_cipher", "_plain", "serde")

    def __init__(self, serde: SerializerProtocol) -> None:
        _refuse_pickle(serde)
        self.serde = serde
        if isinstance(serde, EncryptedSerializer):
            self._plain: SerializerProtocol = serde.serde
            self._cipher: Any = serde.cipher
        else:
            self._plain = serde
            self._cipher = None

    def dumps(self, obj: Any) -> tuple[str, bytes]:
        encoding, data = self.serde.dumps_typed(obj)
        return encoding, data

    def dumps_hashed(self, obj: Any) -> tuple[str, bytes, str]:
        """Encoding, stored bytes, and the SHA-256 of the unencrypted serialized form."""
        encoding, plain = self._plain.dumps_typed(obj)
        digest = hashlib.sha256(encoding.encode() + b"\0" + plain).hexdigest()
        if self._cipher is None:
            return encoding, plain, digest
        cipher_name, ciphertext = self._cipher.encrypt(plain)
        return f"{encoding}+{cipher_name}", ciphertext, digest

    def loads(self, encoding: str, data: bytes | None, *, where: str) -> Any:
        """Decode a stored value; `CorruptRowError` naming `where` when it cannot be decoded."""
        if _is_pickle(encoding):
            raise CorruptRowError(
                f"{where} holds a pickle, which historykit never writes and refuses to load "
                "(unpickling can run arbitrary code)"
            )
        try:
            return self.serde.loads_typed((encoding, data if data is not None else b""))
        except Exception as exc:
            raise CorruptRowError(
                f"{where} cannot be decoded (encoding {encoding!r}): {type(exc).__name__}: {exc}"
            ) from exc
