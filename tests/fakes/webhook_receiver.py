"""A real HTTPS webhook receiver on 127.0.0.1 for answer callbacks: a certificate from a throwaway
CA (trustme) for ``hooks.test``, ``localhost`` and ``127.0.0.1``; it records every POST (path,
headers, raw body) and answers from a per-path script of replies, 200 once the script runs out."""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self, TypeVar

import trustme
from standardwebhooks import Webhook

T = TypeVar("T")
HOST_NAME = "hooks.test"  # tests resolve it to 127.0.0.1 with a StaticResolver, never through DNS


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]  # lowercased names
    body: bytes

    def json(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(self.body)
        return loaded

    def verified(self, secret: str) -> dict[str, Any]:
        """The body, once the standardwebhooks package verified its signature and timestamp."""
        loaded: dict[str, Any] = Webhook(secret).verify(self.body, self.headers)
        return loaded


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


class WebhookReceiver:
    def __init__(self, directory: Path) -> None:
        self.ca = trustme.CA()
        self.ca_file = directory / "callbacks-ca.pem"
        self.ca.cert_pem.write_to_path(str(self.ca_file))
        self.received: list[Received] = []
        self.scripts: dict[str, list[Reply]] = {}
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                headers = {name.lower(): value for name, value in self.headers.items()}
                with outer._lock:
                    outer.received.append(Received(self.path, headers, body))
                    script = outer.scripts.get(self.path, [])
                    reply = script.pop(0) if script else Reply()
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "0")
                self.end_headers()

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                return  # a handshake the client refused (a test of certificate checking)

        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.ca.issue_cert(HOST_NAME, "localhost", "127.0.0.1").configure_cert(context)
        self._server = Server(("127.0.0.1", 0), Handler, bind_and_activate=False)
        self._server.allow_reuse_address = True
        self._server.server_bind()
        self._server.server_activate()
        # The handshake happens on the handler's thread, at its first read, not in accept().
        self._server.socket = context.wrap_socket(
            self._server.socket, server_side=True, do_handshake_on_connect=False
        )
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05})

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def url(self, path: str = "/hook", host: str = HOST_NAME) -> str:
        return f"https://{host}:{self.port}{path}"

    def script(self, path: str, *replies: Reply) -> None:
        with self._lock:
            self.scripts[path] = list(replies)

    def to(self, path: str) -> list[Received]:
        with self._lock:
            return [item for item in self.received if item.path == path]

    def wait_for(self, path: str, count: int, timeout: float = 10.0) -> list[Received]:
        """The first ``count`` POSTs to ``path``, once they came (bounded)."""
        return wait_until(lambda: self.to(path) if len(self.to(path)) >= count else None, timeout)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


def wait_until(probe: Callable[[], T | None], timeout: float = 10.0) -> T:
    """``probe()`` once it is truthy, polled every 20 ms for at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("not in time")
        time.sleep(0.02)
