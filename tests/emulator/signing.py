"""Thinking signatures that commit to their text and to the request prefix they were produced under.

A signature (Anthropic `thinking.signature`, the `data` of `redacted_thinking`, OpenAI
`encrypted_content`) is URL-safe base64 of a small JSON object:

- `c`: HMAC-SHA256(secret, thinking text): the block is genuine and unmodified (R7/R8), checked on
  every model;
- `p`: HMAC-SHA256(secret, prefix digest + thinking text): the prefix binding (R13), checked on binding
  models only. The prefix digest is a SHA-256 chain over the canonical JSON of `[system, tools]`, of
  every message before the block, and of the blocks before it in its own message (`PrefixChain`): a
  chain rather than one JSON document so that checking every block of a long request stays linear;
- `t`: the thinking text, for `redacted_thinking` and reasoning items only (their text is not sent
  back in clear, so the signature carries it; the real APIs encrypt it).

Canonical JSON: keys sorted, no whitespace, `cache_control` keys and `None` values dropped (a cache
breakpoint moving from one message to the next is not a change of the conversation; the real API's
prefix check ignores it just as the prompt cache's prefix match does), string content spelled as one
text block.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any

__all__ = ["PrefixChain", "Signer", "canonical", "canonical_json", "prefix_digest"]


def canonical(value: Any) -> Any:
    """`value` with `cache_control` keys and `None` values removed, recursively."""
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in value.items() if k != "cache_control" and v is not None}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    return value


def canonical_json(value: Any) -> bytes:
    return json.dumps(canonical(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


class PrefixChain:
    """The running digest of a request's prefix: the head (`[system, tools]`), then message by message.

    Each step hashes the previous state with the next message, so the state after any message is a
    value a compaction block can carry (`state`, `from_state`): the prefix it stands for.
    """

    def __init__(self, head: Any) -> None:
        self.state = hashlib.sha256(b"head\0" + canonical_json(head)).digest()

    @classmethod
    def from_state(cls, state: bytes) -> PrefixChain:
        """A chain that continues from `state` (the prefix a compaction block stands for)."""
        chain = cls.__new__(cls)
        chain.state = state
        return chain

    def add_message(self, message: Any) -> None:
        """Extend the chain by one whole message (`{"role": ..., "content": [...]}`)."""
        self.state = hashlib.sha256(self.state + b"\x1emessage\0" + canonical_json(message)).digest()

    def digest_with(self, role: str, blocks: Any) -> bytes:
        """The digest of the chain so far plus the opening `blocks` of a message of `role`."""
        payload = b"\x1dpartial\0" + canonical_json({"role": role, "content": blocks})
        return hashlib.sha256(self.state + payload).digest()


def prefix_digest(head: Any, messages: list[Any], role: str = "assistant", blocks: Any = ()) -> bytes:
    """The prefix digest of a block opening after `messages`, behind `blocks` of its own message."""
    chain = PrefixChain(head)
    for message in messages:
        chain.add_message(message)
    return chain.digest_with(role, list(blocks))


@dataclass(frozen=True)
class Decoded:
    content_mac: str
    prefix_mac: str
    text: str | None


@dataclass(frozen=True)
class Signer:
    """Signs and verifies thinking for one emulator (one secret, like one provider account).

    Example:
        ```python
        signer = Signer(b"k")
        sig = signer.sign("I should call the tool", prefix_digest([system, tools], messages))
        assert signer.verify_content(sig, "I should call the tool")
        ```
    """

    secret: bytes
    """The HMAC key; two emulators with different secrets reject each other's thinking."""

    def _mac(self, kind: bytes, payload: bytes) -> str:
        return hmac.new(self.secret, kind + b"\0" + payload, hashlib.sha256).hexdigest()

    def sign(self, text: str, prefix: bytes, *, carry_text: bool = False) -> str:
        """A signature of `text` produced under the prefix digest `prefix`."""
        body: dict[str, str] = {
            "c": self._mac(b"content", text.encode()),
            "p": self._mac(b"prefix", prefix + b"\0" + text.encode()),
        }
        if carry_text:
            body["t"] = text
        return base64.urlsafe_b64encode(json.dumps(body, sort_keys=True).encode()).decode()

    @staticmethod
    def decode(signature: object) -> Decoded | None:
        if not isinstance(signature, str) or not signature:
            return None
        try:
            body = json.loads(base64.urlsafe_b64decode(signature.encode()))
        except (ValueError, UnicodeDecodeError):
            return None
        if (
            not isinstance(body, dict)
            or not isinstance(body.get("c"), str)
            or not isinstance(body.get("p"), str)
        ):
            return None
        text = body.get("t")
        return Decoded(body["c"], body["p"], text if isinstance(text, str) else None)

    def verify_content(self, signature: object, text: str | None) -> bool:
        """Whether `signature` is ours and `text` is what it signed (`None`: the text it carries)."""
        decoded = self.decode(signature)
        if decoded is None:
            return False
        if text is None:
            text = decoded.text
        if text is None:
            return False
        return hmac.compare_digest(decoded.content_mac, self._mac(b"content", text.encode()))

    def verify_prefix(self, signature: object, text: str | None, prefix: bytes) -> bool:
        """Whether the block was produced under exactly `prefix` (and its text is unmodified)."""
        decoded = self.decode(signature)
        if decoded is None or not self.verify_content(signature, text):
            return False
        if text is None:
            text = decoded.text
        assert text is not None
        return hmac.compare_digest(decoded.prefix_mac, self._mac(b"prefix", prefix + b"\0" + text.encode()))

    def sign_compaction(self, summary: str, state: bytes | None) -> str:
        """The signature of an on-demand compaction block: `c` over the summary, and, when the
        compaction ran on a model that binds thinking, `s`, the prefix state of the conversation it
        summarized (system, tools and every message of the compaction request), authenticated by `p`."""
        body = {"c": self._mac(b"content", summary.encode()), "p": "", "k": "compaction"}
        if state is not None:
            body["s"] = state.hex()
            body["p"] = self._mac(b"compaction", state + b"\0" + summary.encode())
        return base64.urlsafe_b64encode(json.dumps(body, sort_keys=True).encode()).decode()

    def compaction_state(self, signature: object, summary: str) -> bytes | None:
        """The prefix state a genuine compaction block stands for; `None` when it stands for none
        (written by a model that does not bind thinking). Call `verify_content` first."""
        try:
            body = json.loads(base64.urlsafe_b64decode(str(signature).encode()))
            state = bytes.fromhex(body["s"])
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            return None
        expected = self._mac(b"compaction", state + b"\0" + summary.encode())
        return state if hmac.compare_digest(str(body.get("p")), expected) else None

    def carried_text(self, signature: object) -> str | None:
        decoded = self.decode(signature)
        return decoded.text if decoded is not None else None
