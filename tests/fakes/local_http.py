"""A small threaded HTTP/1.1 server on 127.0.0.1 that the fakes build on.

It exists so that a fake far end can be started and stopped from a fixture without leaving a
thread or a socket behind: ``stop()`` wakes every stalled handler, shuts every open
connection and joins the handler threads.
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from tests.fakes.tls import server_context


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # joined by server_close(), so stop() leaves nothing running
    block_on_close = True

    def __init__(self, handler: type[BaseHTTPRequestHandler], tls: ssl.SSLContext | None) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        if tls is not None:  # the handshake happens on the handler's thread, at its first read
            self.socket = tls.wrap_socket(self.socket, server_side=True, do_handshake_on_connect=False)
        self.connections: set[socket.socket] = set()
        self.connections_accepted = 0
        self.connections_lock = threading.Lock()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (a timeout test) resets the connection, or refused the certificate
        # (a test of certificate checking); that is expected here.
        return


class LocalHttpServer:
    """Base for the fakes: subclasses implement ``handle(request)`` for every POST. With ``tls``
    (``tests.fakes.tls``) it serves https, with a certificate from the test run's CA."""

    def __init__(self, *, tls: bool = False) -> None:
        self.scheme = "https" if tls else "http"
        self.stopping = threading.Event()
        outer = self

        class Handler(_Handler):
            fake = outer

        self._server = _Server(Handler, server_context() if tls else None)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05})
        self._started = False

    @property
    def origin(self) -> str:
        """``http(s)://127.0.0.1:<port>``: scheme, host and port, no path."""
        host, port = self._server.server_address[:2]
        return f"{self.scheme}://{host!s}:{port}"

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def connections_accepted(self) -> int:
        """TCP connections accepted so far (a client that reuses its connections opens one)."""
        with self._server.connections_lock:
            return self._server.connections_accepted

    def start(self) -> Self:
        self._thread.start()
        self._started = True
        return self

    def stop(self) -> None:
        """Stop serving, release stalled replies, close open connections, join all threads."""
        if not self._started:
            return
        self._started = False
        self.stopping.set()
        self._server.shutdown()
        with self._server.connections_lock:
            open_connections = list(self._server.connections)
        for connection in open_connections:
            with contextlib.suppress(OSError):  # the client may have closed it already
                connection.shutdown(socket.SHUT_RDWR)
        self._server.server_close()
        self._thread.join()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def hold_until_stopped(self) -> None:
        """Hold the current reply until the server stops (the client is expected to time out)."""
        self.stopping.wait()

    def handle(self, request: Request) -> Reply | None:
        """Answer one request; ``None`` closes the connection without a reply."""
        raise NotImplementedError


class Request:
    """One received request: method, path, headers (case-insensitive) and body."""

    def __init__(self, method: str, path: str, headers: dict[str, str], body: bytes) -> None:
        self.method = method
        self.path = path
        self.headers = {name.lower(): value for name, value in headers.items()}
        self.body = body

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    def json(self) -> Any:
        return json.loads(self.body)


class Reply:
    """One reply: status, headers and body; ``Content-Length`` is always sent."""

    def __init__(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.status = status
        self.body = body
        self.headers = headers or {}

    @classmethod
    def json(cls, status: int, document: Any) -> Reply:
        return cls(status, json.dumps(document).encode(), {"Content-Type": "application/json"})


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fake: LocalHttpServer
    server: _Server

    def setup(self) -> None:
        super().setup()
        with self.server.connections_lock:
            self.server.connections.add(self.connection)
            self.server.connections_accepted += 1

    def finish(self) -> None:
        with self.server.connections_lock:
            self.server.connections.discard(self.connection)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        request = Request(self.command, self.path, dict(self.headers.items()), body)
        reply = self.fake.handle(request)
        if reply is None or self.fake.stopping.is_set():
            self.close_connection = True
            return
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        self.wfile.write(reply.body)
