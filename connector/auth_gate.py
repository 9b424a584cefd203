"""The gate in front of /mcp: every request needs a valid token issued for this resource, tokens
never come in the query string, and a ``tools/call`` whose tool needs a scope the grant lacks is
answered 403 with the scope to step up to — before the call reaches the tool (which checks again).

One pure ASGI layer does what the SDK's bearer backend and auth context middleware would, in the
same terms (``scope["user"]`` is the SDK's ``AuthenticatedUser``, ``get_access_token()`` works in
the tools), without building a Starlette request per call: /mcp is the hot path of the connector.
Every call asks ``verify`` (the core's verified-credential cache, then the store); the gate keeps
no verification of its own, and what it makes of one (the SDK's user, the audience check) is kept
with that verification (``Verified.made``), made once while the cache keeps it.
Header values are stripped of surrounding spaces and tabs on the way (RFC 9110 §5.5): uvicorn's
httptools parser keeps trailing whitespace, and the SDK compares ``Mcp-Name`` with the body as is.
The ``Authorization`` header stops at the gate: the transport and the tools never see the token.
The body is read (at most 4 MiB) only when the grant lacks some tool's scope: a grant holding them
all may call any tool, and the transport caps its bodies itself.

A request without a bearer token is challenged with no error code (RFC 6750 §3.1): just where the
resource metadata is and the scope to ask for; its body is the flat ``missing_token``. A token
that is wrong, expired, revoked or for another resource is ``error="invalid_token"``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from pydantic import AnyHttpUrl, ValidationError
from starlette.authentication import AuthCredentials
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from connector.tools import TOOL_SCOPES
from connector.verifier import Verified, VerifyAccessToken, grant_access_token
from core.errors import CATALOGUE

MAX_BODY_BYTES = 4 * 1024 * 1024
# A grant that holds every tool's scope can call any tool: its bodies are not read here (the
# transport then caps their size itself, at the same 4 MiB).
_TOOL_SCOPES = frozenset(TOOL_SCOPES.values())
_TOO_LARGE = 'error="invalid_request", error_description="body too large"'
_MISSING_TOKEN = {"error": "missing_token", "message": CATALOGUE["missing_token"].message}


@dataclass(frozen=True, slots=True)
class _Caller:
    token: AccessToken
    user: AuthenticatedUser
    credentials: AuthCredentials
    may_call_every_tool: bool  # holds every tool's scope: its bodies need no scope check here

    @classmethod
    def of(cls, token: AccessToken) -> _Caller:
        return cls(
            token,
            AuthenticatedUser(token),
            AuthCredentials(token.scopes),
            _TOOL_SCOPES.issubset(token.scopes),
        )


class McpAuthGate:
    def __init__(
        self,
        app: ASGIApp,
        *,
        verify: VerifyAccessToken,
        issuer: str,
        resource: str,
        resource_metadata_url: str,
        base_scopes: Iterable[str],
    ) -> None:
        self.app = app
        self.verify = verify
        self.issuer = issuer
        self.resource = _normalized(resource)
        self.resource_metadata_url = resource_metadata_url
        self.base_scopes = " ".join(base_scopes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers, authorization = _passed_on(scope["headers"])
        scope = {**scope, "headers": headers}
        if b"access_token=" in scope.get("query_string", b""):
            await self._challenge(send, 400, 'error="invalid_request", error_description="no tokens in URLs"')
            return
        token = _bearer_token(authorization)
        if token is None:  # no authentication information: a challenge without an error code
            await self._challenge(send, 401, f'scope="{self.base_scopes}"', _MISSING_TOKEN)
            return
        caller = await self._authenticate(token)
        if caller is None:
            await self._challenge(send, 401, f'error="invalid_token", scope="{self.base_scopes}"')
            return
        user = caller.user
        scope["user"], scope["auth"] = user, caller.credentials
        if scope["method"] == "POST" and not caller.may_call_every_tool:
            body = await _read_body(receive)
            if body is None:
                await self._challenge(send, 413, _TOO_LARGE)
                return
            missing = _missing_scopes(body, set(user.scopes))
            if missing:
                wanted = " ".join(sorted(set(user.scopes) | missing))
                await self._challenge(send, 403, f'error="insufficient_scope", scope="{wanted}"')
                return
            receive = _replay(body, receive)
        context = auth_context_var.set(user)  # what get_access_token() answers in the tools
        try:
            await self.app(scope, receive, send)
        finally:
            auth_context_var.reset(context)

    async def _authenticate(self, token: str) -> _Caller | None:
        """Who presents ``token``, if it is valid and issued for this resource. ``verify`` answers
        the same verification while the credential cache keeps it: the caller made of it then,
        kept with it, is answered again."""
        verified = await self.verify(token)
        if verified is None:
            return None
        return verified.made(self, lambda: self._caller(token, verified))

    def _caller(self, token: str, verified: Verified) -> _Caller | None:
        """The caller presenting a verified ``token``; ``None`` unless its audience is this
        server's /mcp (RFC 8707; compared as URLs, as the SDK does)."""
        if _normalized(verified.resource) != self.resource:
            return None
        return _Caller.of(grant_access_token(token, verified, self.issuer))

    async def _challenge(
        self, send: Send, status: int, params: str, document: dict[str, str] | None = None
    ) -> None:
        """``status`` with a Bearer challenge of ``params`` and the resource metadata's URL; the
        body is ``document``, by default the challenge's error code."""
        header = f'Bearer {params}, resource_metadata="{self.resource_metadata_url}"'
        body = json.dumps(document or {"error": params.split('"')[1]}).encode()
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


def _passed_on(headers: list[tuple[bytes, bytes]]) -> tuple[list[tuple[bytes, bytes]], bytes | None]:
    """The headers the transport gets: every value stripped of surrounding spaces and tabs, and no
    ``Authorization`` (the gate has taken the token; nothing below reads it, and every header look-up
    of the SDK's walks the list); the same list when there is nothing to take (no copy). And the
    first ``Authorization`` value, stripped, found in the same pass (a plain loop: a generator, or
    a second pass, costs more on every call)."""
    authorization = None
    clean = single = True
    for name, value in headers:
        if value.strip(b" \t") != value:
            clean = False
        if name == b"authorization":
            if authorization is None:
                authorization = value
            else:
                single = False
    if authorization is None:
        if clean:
            return headers, None
    elif clean and single:  # the usual request: one Authorization to take out
        at = headers.index((b"authorization", authorization))
        return headers[:at] + headers[at + 1 :], authorization
    passed = [(name, value.strip(b" \t")) for name, value in headers if name != b"authorization"]
    return passed, None if authorization is None else authorization.strip(b" \t")


def _bearer_token(authorization: bytes | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` value; ``None`` when there is no such
    header, another scheme or an empty token (no authentication information, RFC 6750 §3.1)."""
    if authorization is None:
        return None
    scheme, _, token = authorization.decode("latin-1").partition(" ")
    return token if scheme.lower() == "bearer" and token else None


def _normalized(url: str) -> str | None:
    try:
        return str(AnyHttpUrl(url)).removesuffix("/")
    except ValidationError:
        return None


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
