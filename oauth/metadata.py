"""Discovery: RFC 8414 authorization-server metadata and RFC 9728 protected-resource metadata.

The issuer is the configured public base URL, exactly as a string, in both documents: the MCP
SDK compares them without normalising. It must be https, or http on a loopback host, with no
path, query or fragment; anything else stops the app at start-up (``IssuerError``), never a 500
at run time. ``protected_resource_metadata`` and ``protected_resource_routes`` are what the
connector serves for ``/mcp`` too.
"""

from __future__ import annotations

import ipaddress
from typing import Any
from urllib.parse import urlsplit

from authlib.oauth2 import rfc8414, rfc9207
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from core.principal import CONNECTOR_SCOPES
from core.settings import Settings
from oauth.resource_indicators import mcp_resource

AS_METADATA_PATH = "/.well-known/oauth-authorization-server"
PRM_PATH = "/.well-known/oauth-protected-resource"


class IssuerError(ValueError):
    """The public base URL cannot be an OAuth issuer."""


def issuer_of(settings: Settings) -> str:
    """``settings.base_url`` as the issuer, checked: https, or http on a loopback host."""
    issuer = settings.base_url
    hint = "set RELAYBOX_PUBLIC_URL to the https URL clients use (e.g. https://relay.example)"
    try:
        parts = urlsplit(issuer)
        host = parts.hostname or ""
    except ValueError as exc:
        raise IssuerError(f"the public URL {issuer!r} is not a URL; {hint}") from exc
    if parts.scheme not in ("http", "https") or not host:
        raise IssuerError(f"the public URL {issuer!r} must be an http(s) URL with a host; {hint}")
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
        raise IssuerError(f"the public URL {issuer!r} must be an origin without a path, query or userinfo")
    if parts.scheme == "http" and not is_loopback(host):
        raise IssuerError(f"the OAuth issuer {issuer!r} is http on a non-loopback host; {hint}")
    return issuer.rstrip("/")


def authorization_server_metadata(issuer: str) -> dict[str, Any]:
    """The RFC 8414 document (validated with Authlib, including RFC 9207's field)."""
    document: dict[str, Any] = {
        "issuer": issuer,
        "authorization_endpoint": f"{issuer}/oauth/authorize",
        "token_endpoint": f"{issuer}/oauth/token",
        "registration_endpoint": f"{issuer}/oauth/register",
        "revocation_endpoint": f"{issuer}/oauth/revoke",
        "scopes_supported": list(CONNECTOR_SCOPES),
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_methods_supported": ["none"],
        "revocation_endpoint_auth_methods_supported": ["none"],
        "code_challenge_methods_supported": ["S256"],
        "authorization_response_iss_parameter_supported": True,
        "client_id_metadata_document_supported": True,
    }
    try:
        rfc8414.AuthorizationServerMetadata(document).validate(
            metadata_classes=[rfc9207.AuthorizationServerMetadata]
        )
    except ValueError as exc:
        raise IssuerError(f"the authorization server metadata is invalid: {exc}") from exc
    return document


def protected_resource_metadata(issuer: str) -> dict[str, Any]:
    """The RFC 9728 document for ``<issuer>/mcp``."""
    return {
        "resource": mcp_resource(issuer),
        "authorization_servers": [issuer],
        "scopes_supported": list(CONNECTOR_SCOPES),
        "bearer_methods_supported": ["header"],
        "resource_name": "relaybox",
    }


def discovery_routes(issuer: str) -> list[Route]:
    """The well-known documents, relative to ``/.well-known`` (the caller mounts them there)."""
    as_document = authorization_server_metadata(issuer)
    return [
        Route(
            AS_METADATA_PATH.removeprefix("/.well-known"),
            public_json(as_document),
            methods=["GET", "OPTIONS"],
        ),
        *protected_resource_routes(issuer),
    ]


def protected_resource_routes(issuer: str) -> list[Route]:
    """RFC 9728 documents at ``…/oauth-protected-resource/mcp`` and ``…/oauth-protected-resource``,
    relative to ``/.well-known``."""
    handler = public_json(protected_resource_metadata(issuer))
    base = PRM_PATH.removeprefix("/.well-known")
    return [
        Route(f"{base}/mcp", handler, methods=["GET", "OPTIONS"]),
        Route(base, handler, methods=["GET", "OPTIONS"]),
    ]


def public_json(document: dict[str, Any]) -> Any:
    async def serve(request: Request) -> Response:
        if request.method == "OPTIONS":
            return Response(status_code=204, headers=CORS_HEADERS)
        return JSONResponse(document, headers={**CORS_HEADERS, "Cache-Control": "public, max-age=300"})

    return serve


CORS_HEADERS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
    "Access-Control-Allow-Headers": "Authorization, Content-Type, MCP-Protocol-Version",
    "Access-Control-Max-Age": "600",
}


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, without brackets or port) is this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
