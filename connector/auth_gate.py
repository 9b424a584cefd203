"""The gate in front of /mcp: every request needs a valid token issued for this resource, tokens
never come in the query string, and a ``tools/call`` whose tool needs a scope the grant lacks is
answered 403 with the scope to step up to — before the call reaches the tool (which checks again).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from connector.tools import TOOL_SCOPES

MAX_BODY_BYTES = 4 * 1024 * 1024


class McpAuthGate:
    def __init__(self, app: ASGIApp, *, resource_metadata_url: str, base_scopes: Iterable[str]) -> None:
        self.app = app
        self.resource_metadata_url = resource_metadata_url
        self.base_scopes = " ".join(base_scopes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not str(scope.get("path", "")).startswith("/mcp"):
            await self.app(scope, receive, send)
            return
        if b"access_token=" in scope.get("query_string", b""):
            await self._challenge(send, 400, 'error="invalid_request", error_description="no tokens in URLs"')
            return
        user = scope.get("user")
        if not isinstance(user, AuthenticatedUser):
            await self._challenge(send, 401, f'error="invalid_token", scope="{self.base_scopes}"')
            return
        if scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive)
        if body is None:
            await self._challenge(send, 413, 'error="invalid_request", error_description="body too large"')
            return
        missing = _missing_scopes(body, set(user.scopes))
        if missing:
            wanted = " ".join(sorted(set(user.scopes) | missing))
            await self._challenge(send, 403, f'error="insufficient_scope", scope="{wanted}"')
            return
        await self.app(scope, _replay(body, receive), send)

    async def _challenge(self, send: Send, status: int, params: str) -> None:
        header = f'Bearer {params}, resource_metadata="{self.resource_metadata_url}"'
        body = json.dumps({"error": params.split('"')[1]}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"www-authenticate", header.encode()),
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


async def _read_body(receive: Receive) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _missing_scopes(body: bytes, granted: set[str]) -> set[str]:
    """The scopes the body's ``tools/call`` requests need and the grant lacks (trusting the body,
    not the Mcp-Name header, which legacy clients do not send)."""
    try:
        parsed: Any = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return set()  # the transport answers malformed JSON itself
    messages = parsed if isinstance(parsed, list) else [parsed]
    needed: set[str] = set()
    for message in messages:
        if isinstance(message, dict) and message.get("method") == "tools/call":
            params = message.get("params")
            name = params.get("name") if isinstance(params, dict) else None
            if isinstance(name, str) and name in TOOL_SCOPES:
                needed.add(TOOL_SCOPES[name])
    return needed - granted
