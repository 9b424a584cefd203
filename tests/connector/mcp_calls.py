"""Calling the connector's tools in tests: the grant a client acts under, a tool's structured
answer, and a tool's error text."""

from __future__ import annotations

from typing import Any

from mcp import Client

from core.principal import CONNECTOR_SCOPES, Principal
from tests.helpers import FakeDevice


def grant(phone: FakeDevice, scopes: frozenset[str] = frozenset(CONNECTOR_SCOPES)) -> Principal:
    """A connector grant on ``phone``'s account with ``scopes`` (every connector scope by default)."""
    return Principal.connector_grant(
        account_id=phone.account_id, client_id="client-1", grant_id="grant-1", scopes=scopes
    )


async def structured(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The tool's structured answer; the call must succeed."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error is False and result.structured_content is not None, result
    return dict(result.structured_content)


async def tool_error(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    """The text of the tool's error; the call must fail."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error is True, result
    return str(result.content[0].text)  # type: ignore[union-attr]
