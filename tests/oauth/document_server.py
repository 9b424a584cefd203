"""A small HTTPS server on 127.0.0.1 that serves client ID metadata documents for GET requests,
with a certificate from the test run's CA (``tests.fakes.tls``)."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from tests.fakes.tls import server_context


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    stall: bool = False  # hold the reply until the server stops (the fetch must time out)

    @classmethod
    def json(cls, document: Any, **headers: str) -> Reply:
        return cls(200, json.dumps(document).encode(), {"Content-Type": "application/json", **headers})


class DocumentServer:
    def __init__(self) -> None:
        self.replies: dict[str, Reply] = {}
        self.fetched: list[str] = []
        self.stopping = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                outer.fetched.append(self.path)
                reply = outer.replies.get(self.path, Reply(404, b"not found"))
                if reply.stall:
                    outer.stopping.wait(10)
                    self.close_connection = True
                    return
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                return  # a handshake the client refused, or a client that gave up

        self._server = Server(("127.0.0.1", 0), Handler)
        # The handshake happens on the handler's thread, at its first read, not in accept().
        self._server.socket = server_context().wrap_socket(
            self._server.socket, server_side=True, do_handshake_on_connect=False
        )
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05})

    @property
    def origin(self) -> str:
        host, port = self._server.server_address[:2]
        return f"https://{host!s}:{port}"

    def url(self, path: str) -> str:
        return self.origin + path

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
