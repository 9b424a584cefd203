"""What the MCP server says of itself and how it answers calls it cannot serve, on both protocol
eras: tools only (no prompts or resources capability, and their methods are Method not found, never
an internal error with a logged traceback), and tool arguments that fail their schema answered as
``invalid_arguments: …`` tool errors a model can act on."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp import Client, MCPError
from mcp.types import METHOD_NOT_FOUND

from connector.mcp_server import build_mcp
from core.principal import CONNECTOR_SCOPES, Principal
from core.runtime.core import Core

pytestmark = pytest.mark.anyio

MODES = ["legacy", "auto"]  # auto: server/discover, the 2026-07-28 era
# Each tool with required arguments: one call missing them, one with a value of the wrong type.
BAD_ARGUMENTS: list[tuple[str, dict[str, Any], str]] = [
    ("send_notification", {}, "message: Field required"),
    ("send_notification", {"message": ["not", "text"]}, "message: "),
    ("remind_me", {"message": "m"}, "at: Field required"),
    ("remind_me", {"message": "m", "at": {"when": "soon"}}, "at"),
    ("cancel_reminder", {}, "reminder_id: Field required"),
    ("cancel_reminder", {"reminder_id": 7}, "reminder_id: "),
    ("request_approval", {}, "question: Field required"),
    ("request_approval", {"question": "q", "choices": "yes"}, "choices: "),
    ("check_reply", {}, "request_id: Field required"),
    ("check_reply", {"request_id": "int_x", "wait_seconds": "long"}, "wait_seconds: "),
    ("send_file", {"content": "x"}, "filename: Field required"),
    ("send_file", {"filename": "a.txt", "content": 3}, "content: "),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=MODES)
async def session(request: pytest.FixtureRequest, core: Core) -> AsyncIterator[Client]:
    grant = Principal.connector_grant(
        account_id="account-1", client_id="client-1", grant_id="grant-1", scopes=frozenset(CONNECTOR_SCOPES)
    )
    async with Client(build_mcp(core, lambda: grant), mode=request.param) as client:
        assert (client.protocol_version == "2026-07-28") is (request.param == "auto")
        yield client


async def test_only_the_tools_capability_is_advertised(session: Client) -> None:
    capabilities = session.server_capabilities
    assert capabilities.tools is not None
    assert (capabilities.prompts, capabilities.resources) == (None, None)


@pytest.mark.parametrize("method", ["prompts", "resources"])
async def test_prompts_and_resources_are_method_not_found_and_log_no_error(
    session: Client, method: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def call() -> object:
        if method == "prompts":
            return await session.get_prompt("no_such_prompt")
        return await session.read_resource("relaybox://nothing")

    with caplog.at_level(logging.INFO), pytest.raises(MCPError) as raised:
        await call()
    assert raised.value.error.code == METHOD_NOT_FOUND
    assert not [record for record in caplog.records if record.levelno >= logging.WARNING]


@pytest.mark.parametrize(("tool", "arguments", "problem"), BAD_ARGUMENTS)
async def test_arguments_that_fail_the_schema_are_invalid_arguments(
    session: Client, tool: str, arguments: dict[str, Any], problem: str
) -> None:
    result = await session.call_tool(tool, arguments)
    assert result.is_error is True
    text = result.content[0].text  # type: ignore[union-attr]
    assert text.startswith(f"invalid_arguments: {problem}"), text
    assert "validation error" not in text and "pydantic" not in text


async def test_an_unknown_tool_is_a_tool_error_with_its_code(session: Client) -> None:
    result = await session.call_tool("launch_missiles", {})
    assert result.is_error is True
    assert result.content[0].text == "unknown_tool: there is no tool named 'launch_missiles'"  # type: ignore[union-attr]
