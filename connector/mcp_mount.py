"""Mounting the MCP server at /mcp behind OAuth: our gate (bearer tokens through the authorization
server's ``verify_access_token``, the SDK's auth context, per-tool scopes) around the SDK's
Streamable HTTP transport."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from itertools import product
from urllib.parse import urlsplit

from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp

from connector.auth_gate import McpAuthGate
from connector.cors import CrossOrigin
from connector.mcp_server import build_mcp
from connector.verifier import VerifyAccessToken
from core.principal import CONNECTOR_SCOPES
from core.runtime.core import Core
from core.settings import Settings
from oauth.metadata import is_loopback

MCP_PATH = "/mcp"


@dataclass(frozen=True)
class McpMount:
    app: ASGIApp  # route MCP_PATH to it: it serves the MCP transport behind the auth gate
    lifespan: Callable[[], AbstractAsyncContextManager[None]]  # the host app enters it: a mount's never runs
    cross_origin: CrossOrigin  # browsers' access: the origins the transport admits


def mount_mcp(core: Core, verify: VerifyAccessToken) -> McpMount:
    settings = core.settings
    resource = settings.base_url + MCP_PATH
    mcp = build_mcp(core)
    mcp.streamable_http_app(  # makes the session manager; its Starlette app around it is not used
        streamable_http_path=MCP_PATH,
        transport_security=TransportSecuritySettings(
            allowed_hosts=allowed_hosts(settings.base_url, settings.mcp_allowed_hosts),
            allowed_origins=mcp_origins(settings),
        ),
        max_request_body_size=4 * 1024 * 1024,
    )
    # The host app routes /mcp here and has the error handling already: a second Starlette app
    # (its own error middlewares, router and route) would only repeat them on every call.
    guarded = McpAuthGate(
        mcp.session_manager.handle_request,
        verify=verify,
        issuer=settings.base_url,
        resource=resource,
        resource_metadata_url=f"{settings.base_url}/.well-known/oauth-protected-resource{MCP_PATH}",
        base_scopes=[s for s in CONNECTOR_SCOPES if s != "files:send"],
    )

    @asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        async with mcp.session_manager.run():
            yield

    return McpMount(guarded, lifespan, CrossOrigin(mcp_origins(settings)))


LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")


def allowed_hosts(base_url: str, extra: list[str]) -> list[str]:
    """The Host values the DNS-rebinding guard admits: the public host (any port spelled), every
    loopback name when the public host is one (``localhost`` and ``127.0.0.1`` are the same
    machine to a person), and extras."""
    host = urlsplit(base_url).netloc
    bare = host.rsplit(":", 1)[0] if ":" in host and not host.endswith("]") else host
    names = LOOPBACK_HOSTS if _on_loopback(base_url) else (bare,)
    return sorted({host, *names, *(f"{name}:*" for name in names), *extra})


def mcp_origins(settings: Settings) -> list[str]:
    """The Origin values ``/mcp`` admits: the server's own, the configured ones, and any loopback
    origin (any port) when the server itself is on loopback."""
    origins = [settings.base_url, *settings.mcp_allowed_origins]
    if _on_loopback(settings.base_url):
        spelled = product(("http", "https"), LOOPBACK_HOSTS, ("", ":*"))
        origins += [f"{scheme}://{name}{port}" for scheme, name, port in spelled]
    return sorted(set(origins))


def _on_loopback(url: str) -> bool:
    host = urlsplit(url).hostname
    return host is not None and is_loopback(host)
