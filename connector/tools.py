"""The connector's tools as the MCP SDK serves them. Each ``Tool`` declared in
``connector.tool_set`` is registered with its operation bound to the verified grant of the call;
a result is handed to the SDK, which makes it structured content (and its JSON text) as for any
``MCPServer`` tool, and a core error becomes an ``isError`` result whose text starts with the stable
code. ``TOOL_SCOPES`` is what the auth gate checks before a call reaches a tool."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server import MCPServer
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, ValidationError

from connector.tool_base import Tool, ToolCall
from connector.tool_set import TOOLS
from core.errors import RelayError
from core.principal import Principal
from core.runtime.core import Core

log = logging.getLogger("relaybox.connector")
PrincipalSource = Callable[[], Principal]

# The scope each tool needs; the auth gate answers 403 with it before the call reaches the tool.
TOOL_SCOPES: dict[str, str] = {tool.name: tool.scope for tool in TOOLS}
MAX_PROBLEMS = 5  # argument problems named in one invalid_arguments error


def register_tools(mcp: MCPServer, core: Core, principal: PrincipalSource) -> None:
    """Add the tools of ``TOOLS`` to ``mcp``, in their order; ``principal`` yields the verified
    connector grant of the call. A description is its operation's docstring, dedented."""
    for tool in TOOLS:
        mcp.add_tool(
            bind(tool, core, principal),
            name=tool.name,
            title=tool.title,
            description=inspect.cleandoc(tool.operation.__doc__ or ""),
            annotations=tool.annotations,
        )


def bind(
    tool: Tool, core: Core, principal: PrincipalSource
) -> Callable[..., Awaitable[BaseModel | CallToolResult]]:
    """``tool``'s operation as the SDK calls it: the tool's arguments (and the SDK's ``Context``
    where the operation takes one) as keywords, the call's ``ToolCall`` put first. Its signature
    is the operation's without ``call``, returning ``tool.output``: the SDK derives the schemas from
    it. The output model itself is returned: the SDK checks it against the output schema (the very
    model: nothing to validate again) and renders it as structured content and its JSON text, as it
    does for any tool; a core error becomes ``code: message``, and anything unexpected
    ``internal_error`` (logged, never shown)."""
    signature = inspect.signature(tool.operation, eval_str=True)
    if signature.return_annotation is not tool.output:
        raise TypeError(f"{tool.name} returns {signature.return_annotation!r}, not {tool.output!r}")
    _call, *arguments = signature.parameters.values()

    async def call_tool(**kwargs: Any) -> BaseModel | CallToolResult:
        try:
            return await tool.operation(ToolCall(core, principal()), **kwargs)
        except RelayError as error:
            return tool_error(error.code, error.message)
        except ValidationError as error:
            return tool_error("invalid_arguments", describe(error))
        except Exception:
            log.exception("connector tool %s failed unexpectedly", tool.name)
            return tool_error("internal_error", "Something went wrong on our side.")

    call_tool.__name__ = call_tool.__qualname__ = tool.name
    call_tool.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=arguments, return_annotation=tool.output
    )
    call_tool.__annotations__ = {p.name: p.annotation for p in arguments} | {"return": tool.output}
    return call_tool


def tool_error(code: str, message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=f"{code}: {message}")], is_error=True)


def describe(error: ValidationError) -> str:
    """Which arguments and why, in a line: ``at: Field required; choices.1: String should have at most
    48 characters``. The rejected values are the caller's data and are not repeated."""
    problems = [
        f"{'.'.join(str(part) for part in item['loc']) or 'arguments'}: {item['msg']}"
        for item in error.errors(include_url=False, include_input=False)[:MAX_PROBLEMS]
    ]
    return "; ".join(problems)
