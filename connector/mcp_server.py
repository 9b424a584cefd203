"""The MCP server: relaybox's tools over Streamable HTTP at /mcp."""

from __future__ import annotations

from mcp.server import MCPServer
from mcp.server.auth.middleware.auth_context import get_access_token

from connector.tools import PrincipalSource, register_tools
from connector.verifier import GrantAccessToken
from core.context import Core
from core.errors import RelayError
from core.principal import Principal

INSTRUCTIONS = (
    "relaybox reaches the user's own phone: notify them, set reminders the phone fires itself, ask a "
    "question with 2-4 buttons and read the tap, ring a lost phone, or drop a text file into Downloads. "
    "Everything is end-to-end encrypted to the user's devices."
)


def build_mcp(core: Core, principal: PrincipalSource | None = None) -> MCPServer:
    """The MCP server with its tools; ``principal`` defaults to the verified token of the request."""
    mcp = MCPServer("relaybox", version="1.1.0", instructions=INSTRUCTIONS)
    register_tools(mcp, core, principal or principal_from_access_token)
    return mcp


def principal_from_access_token() -> Principal:
    """The connector grant behind the request's verified access token (set by the auth gate)."""
    token = get_access_token()
    if not isinstance(token, GrantAccessToken):
        raise RelayError("invalid_token")
    return token.principal
