"""Mounting the MCP server at /mcp behind OAuth: the SDK's bearer backend (with our verifier),
its auth context, and our gate for per-tool scopes, around the Streamable HTTP transport."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit

from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import AnyHttpUrl
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from connector.auth_gate import McpAuthGate
from connector.mcp_server import build_mcp
from connector.verifier import GrantTokenVerifier, VerifyAccessToken
from core.context import Core
from core.principal import CONNECTOR_SCOPES

MCP_PATH = "/mcp"


@dataclass(frozen=True)
class McpMount:
    app: ASGIApp  # mount it at "/" after every other route: it answers /mcp and 404s the rest
    lifespan: Callable[[], AbstractAsyncContextManager[None]]  # the host app enters it: a mount's never runs


def mount_mcp(core: Core, verify: VerifyAccessToken) -> McpMount:
    settings = core.settings
    resource = settings.base_url + MCP_PATH
    mcp = build_mcp(core)
    transport = mcp.streamable_http_app(
        streamable_http_path=MCP_PATH,
        transport_security=TransportSecuritySettings(
            allowed_hosts=allowed_hosts(settings.base_url, settings.mcp_allowed_hosts),
            allowed_origins=[settings.base_url, *settings.mcp_allowed_origins],
        ),
        max_request_body_size=4 * 1024 * 1024,
    )
    gate = McpAuthGate(
        transport,
        resource_metadata_url=f"{settings.base_url}/.well-known/oauth-protected-resource{MCP_PATH}",
        base_scopes=[s for s in CONNECTOR_SCOPES if s != "files:send"],
    )
    verifier = GrantTokenVerifier(verify, issuer=settings.base_url)
    guarded = StripHeaderWhitespace(
        AuthenticationMiddleware(
            AuthContextMiddleware(gate),
            backend=BearerAuthBackend(verifier, resource_server_url=AnyHttpUrl(resource)),
        )
    )

    @asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        async with mcp.session_manager.run():
            yield

    return McpMount(guarded, lifespan)


def allowed_hosts(base_url: str, extra: list[str]) -> list[str]:
    """The Host values the DNS-rebinding guard admits: the public host (any port spelled) and extras."""
    host = urlsplit(base_url).netloc
    bare = host.rsplit(":", 1)[0] if ":" in host and not host.endswith("]") else host
    return sorted({host, bare, f"{bare}:*", *extra})


class StripHeaderWhitespace:
    """Header values without surrounding spaces and tabs (RFC 9110 §5.5). uvicorn's httptools
    parser keeps trailing whitespace, and the SDK compares ``Mcp-Name`` with the body as is."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope = {**scope, "headers": [(name, value.strip(b" \t")) for name, value in scope["headers"]]}
        await self.app(scope, receive, send)
