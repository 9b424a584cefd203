"""Mounting the MCP server at /mcp behind OAuth: our gate (bearer tokens through our verifier, the
SDK's auth context, per-tool scopes) around the SDK's Streamable HTTP transport."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit

from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp

from connector.auth_gate import McpAuthGate
from connector.mcp_server import build_mcp
from connector.verifier import GrantTokenVerifier, VerifyAccessToken
from core.context import Core
from core.principal import CONNECTOR_SCOPES

MCP_PATH = "/mcp"


@dataclass(frozen=True)
class McpMount:
    app: ASGIApp  # route MCP_PATH to it: it serves the MCP transport behind the auth gate
    lifespan: Callable[[], AbstractAsyncContextManager[None]]  # the host app enters it: a mount's never runs


def mount_mcp(core: Core, verify: VerifyAccessToken) -> McpMount:
    settings = core.settings
    resource = settings.base_url + MCP_PATH
    mcp = build_mcp(core)
    mcp.streamable_http_app(  # makes the session manager; its Starlette app around it is not used
        streamable_http_path=MCP_PATH,
        transport_security=TransportSecuritySettings(
            allowed_hosts=allowed_hosts(settings.base_url, settings.mcp_allowed_hosts),
            allowed_origins=[settings.base_url, *settings.mcp_allowed_origins],
        ),
        max_request_body_size=4 * 1024 * 1024,
    )
    # The host app routes /mcp here and has the error handling already: a second Starlette app
    # (its own error middlewares, router and route) would only repeat them on every call.
    guarded = McpAuthGate(
        mcp.session_manager.handle_request,
        verifier=GrantTokenVerifier(verify, issuer=settings.base_url),
        resource=resource,
        resource_metadata_url=f"{settings.base_url}/.well-known/oauth-protected-resource{MCP_PATH}",
        base_scopes=[s for s in CONNECTOR_SCOPES if s != "files:send"],
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
