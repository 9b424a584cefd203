"""The MCP server: relaybox's tools over Streamable HTTP at /mcp.

It offers tools and nothing else: the prompts and resources handlers the SDK's ``MCPServer``
installs by default are taken out, so neither capability is advertised (clients then never call
them; a call is -32601 Method not found, never a -32603 with a traceback). A tool's arguments that
fail its schema come back as a tool error the model can act on, starting with a stable code
(``invalid_arguments: at: Field required``), not pydantic's report; an unknown tool likewise
(``unknown_tool: …``)."""

from __future__ import annotations

from typing import Any

from mcp.server import MCPServer
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, InputRequiredResult
from pydantic import ValidationError

from connector.tools import PrincipalSource, describe, register_tools, tool_error
from connector.verifier import GrantAccessToken
from core.errors import RelayError
from core.principal import Principal
from core.runtime.core import Core

INSTRUCTIONS = (
    "relaybox reaches the user's own phone: notify them, set reminders the phone fires itself, ask a "
    "question with 2-4 buttons and read the tap, ring a lost phone, or drop a text file into Downloads. "
    "Everything is end-to-end encrypted to the user's devices."
)
# What MCPServer serves by default and relaybox has nothing for.
UNOFFERED_METHODS = (
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
)


class RelayboxMCP(MCPServer):
    """``MCPServer`` with tools only, and tool-call failures of its own making put in relaybox's
    ``code: message`` form (a core error already is: ``connector.tools.bind``)."""

    def __init__(self) -> None:
        super().__init__("relaybox", version="1.1.0", instructions=INSTRUCTIONS)
        handlers: dict[str, Any] = self._lowlevel_server._request_handlers  # no public way to drop them
        for method in UNOFFERED_METHODS:
            handlers.pop(method, None)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as error:
            if isinstance(error, UnexpectedToolError):
                raise
            if isinstance(error.__cause__, ValidationError):
                return tool_error("invalid_arguments", describe(error.__cause__))
            if self._tool_manager.get_tool(name) is None:
                return tool_error("unknown_tool", f"there is no tool named {name!r}")
            raise


def build_mcp(core: Core, principal: PrincipalSource | None = None) -> MCPServer:
    """The MCP server with its tools; ``principal`` defaults to the verified token of the request."""
    mcp = RelayboxMCP()
    register_tools(mcp, core, principal or principal_from_access_token)
    return mcp


def principal_from_access_token() -> Principal:
    """The connector grant behind the request's verified access token (set by the auth gate)."""
    token = get_access_token()
    if not isinstance(token, GrantAccessToken):
        raise RelayError("invalid_token")
    return token.principal
