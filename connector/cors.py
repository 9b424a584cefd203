"""Cross-origin access to ``/mcp`` for MCP clients that run in a browser (the MCP Inspector's
direct mode, web-based assistants): a preflight (``OPTIONS``) from an allowed origin is answered,
and every response to an allowed origin names it and exposes the headers such a client must read
(``Mcp-Session-Id``, ``WWW-Authenticate`` for discovery, ``MCP-Protocol-Version``).

Allowed origins are the ones the MCP transport's DNS-rebinding guard admits (``mcp_origins``): the
server's own, ``RELAYBOX_MCP_ALLOWED_ORIGINS``, and, when the server itself is on a loopback
address, any loopback origin (the Inspector runs on ``localhost:6274`` beside a server on
``127.0.0.1:8787``). A ``host:*`` entry admits any port, as in the SDK. No cookies are involved:
``/mcp`` takes bearer tokens only, so credentials are never allowed.

The OAuth endpoints answer any origin themselves (``oauth.metadata.CORS_HEADERS``).
"""

from __future__ import annotations

from starlette.types import Message, Receive, Scope, Send

from core.api.errors import render
from core.errors import RelayError

ALLOWED_METHODS = "GET, POST, DELETE, OPTIONS"
ALLOWED_HEADERS = "Authorization, Content-Type, Accept, Mcp-Session-Id, MCP-Protocol-Version, Last-Event-ID"
EXPOSED_HEADERS = "Mcp-Session-Id, MCP-Protocol-Version, WWW-Authenticate"
PREFLIGHT_MAX_AGE_S = 600


class CrossOrigin:
    def __init__(self, origins: list[str]) -> None:
        self.exact = frozenset(origin for origin in origins if not origin.endswith(":*"))
        self.any_port = tuple(origin[:-1] for origin in origins if origin.endswith(":*"))  # "http://h:"

    def allows(self, origin: str) -> bool:
        if origin in self.exact:
            return True
        return any(origin.startswith(prefix) and origin[len(prefix) :].isdigit() for prefix in self.any_port)

    async def preflight(self, origin: str, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer ``OPTIONS``: 204 with what the origin may do, or 403 ``forbidden`` for another origin."""
        if not self.allows(origin):
            refused = RelayError("forbidden", "This origin may not call /mcp from a browser.")
            await render(refused)(scope, receive, send)
            return
        headers = [
            (b"access-control-allow-origin", origin.encode()),
            (b"access-control-allow-methods", ALLOWED_METHODS.encode()),
            (b"access-control-allow-headers", ALLOWED_HEADERS.encode()),
            (b"access-control-max-age", str(PREFLIGHT_MAX_AGE_S).encode()),
            (b"vary", b"Origin"),
        ]
        await send({"type": "http.response.start", "status": 204, "headers": headers})
        await send({"type": "http.response.body", "body": b""})

    def exposing(self, origin: str, send: Send) -> Send:
        """``send`` with the response headers that let an allowed ``origin`` read it."""
        if not self.allows(origin):
            return send
        added = [
            (b"access-control-allow-origin", origin.encode()),
            (b"access-control-expose-headers", EXPOSED_HEADERS.encode()),
            (b"vary", b"Origin"),
        ]

        async def send_exposed(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *added]
            await send(message)

        return send_exposed


def request_origin(scope: Scope) -> str | None:
    """The request's ``Origin`` header, read where it lies (every /mcp call asks: no ``Headers``
    copy of the list for one look-up, and a plain loop, which costs less than a generator)."""
    headers: list[tuple[bytes, bytes]] = scope["headers"]
    for name, value in headers:
        if name == b"origin":
            return value.decode("latin-1")
    return None
