"""A far end for notification buttons: an HTTP server on loopback that records the method, path and
text body of every request (and its headers, apart), answering 204."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

Request = tuple[str, str, str]  # method, path, body


@contextmanager
def far_end(headers: list[dict[str, str]] | None = None) -> Iterator[tuple[str, list[Request]]]:
    """Its origin and the requests it got; each request's headers go into ``headers`` if given."""
    seen: list[Request] = []

    class Recorder(http.server.BaseHTTPRequestHandler):
        def answer(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            seen.append((self.command, self.path, self.rfile.read(length).decode()))
            if headers is not None:
                headers.append({name.lower(): value for name, value in self.headers.items()})
            self.send_response(204)
            self.end_headers()

        def do_GET(self) -> None:
            self.answer()

        def do_POST(self) -> None:
            self.answer()

        def do_PUT(self) -> None:
            self.answer()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
