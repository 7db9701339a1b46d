"""A rejection: the status and JSON body a provider answers a bad request with."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any, Literal


@dataclass
class Rejection(Exception):
    """Raised by a validator; the emulator turns it into the provider's error response."""

    status: int
    message: str
    rule: str
    """Which rule of PROVIDER-RULES.md (R1…R13) or `window` / `request` the request broke."""
    provider: Literal["anthropic", "openai"]
    error_type: str = "invalid_request_error"
    param: str | None = None
    code: str | None = None

    def __str__(self) -> str:
        return f"{self.status} [{self.rule}] {self.message}"

    def body(self) -> dict[str, Any]:
        if self.provider == "anthropic":
            return {
                "type": "error",
                "error": {"type": self.error_type, "message": self.message},
                "request_id": f"req_{secrets.token_hex(12)}",
            }
        return {
            "error": {
                "message": self.message,
                "type": self.error_type,
                "param": self.param,
                "code": self.code,
            }
        }
