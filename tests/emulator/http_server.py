"""The provider emulator served over HTTP on a local port, for clients configured by a base URL
(the SDKs' `ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL`: a subprocess, or a model built from its name)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from tests.emulator.emulator import ProviderEmulator

__all__ = ["serve_http"]


@contextmanager
def serve_http(emulator: ProviderEmulator) -> Iterator[str]:
    """Serve `emulator` on 127.0.0.1 while the block runs; yields its base URL (no `/v1`)."""
    lock = threading.Lock()  # the emulator's recorder and scripts are not thread-safe

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            with lock:
                status, headers, content = emulator.handle(
                    "POST", urlsplit(self.path).path, dict(self.headers), body
                )
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("content-length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
