"""A TCP proxy that can turn into a black hole: the failure no timeout in a connection string catches.

Forwarding, it relays bytes both ways between each client and the target. Black-holed, it keeps
every connection open and reads (so the client's kernel sees each byte acknowledged) but relays
nothing and answers nothing, old connections and new ones alike: a server that accepts and never
answers, a stalled middlebox, a half-dead path. ``heal`` drops the connections it held (as a
restarted middlebox would) and forwards again.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Self

CHUNK = 65_536


class BlackholeProxy:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._forwarding = threading.Event()
        self._forwarding.set()
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def url_for(self, url: str, original_port: int) -> str:
        """``url`` with the target's port replaced by the proxy's."""
        return url.replace(f":{original_port}", f":{self.port}")

    def blackhole(self) -> None:
        self._forwarding.clear()

    def heal(self) -> None:
        with self._lock:
            held, self._open = self._open, set()
        for sock in held:
            _close(sock)
        self._forwarding.set()

    def close(self) -> None:
        self._closed = True
        _close(self._listener)
        self.heal()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                _close(client)
                continue
            upstream.settimeout(None)
            with self._lock:
                self._open.update((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        """Relay ``source`` to ``sink`` while forwarding; swallow what arrives while black-holed."""
        try:
            while chunk := source.recv(CHUNK):
                if self._forwarding.is_set():
                    sink.sendall(chunk)
        except OSError:
            pass
        finally:
            _close(source)
            _close(sink)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
