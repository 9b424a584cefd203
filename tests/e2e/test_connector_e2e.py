"""The MCP connector end to end: the SDK's client connects to a real `relaybox serve` through the
full OAuth flow (consent confirmed by the virtual phone) and calls every tool, on both protocol
eras; each tool's effect is seen on the virtual phone."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Literal

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.connector.sdk_oauth import ApprovingBrowser, MemoryStorage, cli_confirmer, oauth_provider
from tests.e2e.conftest import TRACEBACK, BackgroundCli, Cli, RelayboxServer

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]
SERVER_ENV = {"RELAYBOX_REMINDER_MIN_LEAD_S": "2"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def relaybox_server(tmp_path: Path) -> Iterator[str]:
    with RelayboxServer(tmp_path / "server", env=SERVER_ENV) as server:
        yield server.wait_until_ready()
    assert TRACEBACK not in server.stderr(), server.stderr()


@pytest.fixture
def phone_run(cli: Cli, tmp_path: Path) -> Iterator[tuple[BackgroundCli, Path]]:
    registered = cli.run("phone", "register", "--name", "Pixel", "--app-build", "100")
    assert registered.returncode == 0, registered
    downloads = tmp_path / "Downloads"
    running = cli.start("phone", "run", "--answer", "0", "--downloads", str(downloads))
    yield running, downloads
    running.close()


@pytest.fixture
async def connected(
    relaybox_server: str, cli: Cli
) -> AsyncIterator[tuple[httpx2.AsyncClient, ApprovingBrowser]]:
    async with httpx2.AsyncClient(follow_redirects=False, timeout=30) as browser_http:
        browser = ApprovingBrowser(relaybox_server, browser_http, cli_confirmer(cli.run))
        provider = oauth_provider(relaybox_server, MemoryStorage(), browser)
        async with httpx2.AsyncClient(auth=provider, timeout=httpx2.Timeout(30, read=120)) as http:
            yield http, browser


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_every_tool_reaches_the_virtual_phone(
    relaybox_server: str,
    phone_run: tuple[BackgroundCli, Path],
    connected: tuple[httpx2.AsyncClient, ApprovingBrowser],
    mode: str,
) -> None:
    phone, downloads = phone_run
    http, browser = connected
    async with Client(
        streamable_http_client(f"{relaybox_server}/mcp", http_client=http), mode=mode
    ) as client:
        with anyio.fail_after(60):
            tools = await client.list_tools()
        assert len(tools.tools) == 11
        assert browser.confirmations and "relaybox tests" in browser.confirmations[0]

        sent = await client.call_tool("send_notification", {"message": "the build is green", "title": "CI"})
        assert not sent.is_error, sent
        await wait_line(phone, re.compile(r"notification: CI .* the build is green"))
        progress = {"message": "deploy 2/2", "sequence_id": "deploy-7", "tags": ["rocket"]}
        for message in ("deploy 1/2", "deploy 2/2"):
            stepped = await client.call_tool("send_notification", progress | {"message": message})
            assert (
                stepped.structured_content is not None
                and stepped.structured_content["sequence_id"] == "deploy-7"
            )
        await wait_line(phone, re.compile(r"notification \(replaces deploy-7\): 🚀 deploy 2/2$"))
        cleared = await client.call_tool("clear_notification", {"sequence_id": "deploy-7"})
        assert not cleared.is_error, cleared
        await wait_line(phone, re.compile(r"notification cleared: deploy-7$"))

        at = int(time.time()) + 3
        armed = await client.call_tool("remind_me", {"message": "stretch your legs", "at": at})
        assert not armed.is_error, armed
        await wait_line(phone, re.compile(r"REMINDER: stretch your legs"), within=15)

        asked = await client.call_tool("request_approval", {"question": "Deploy?", "choices": ["Yes", "No"]})
        assert asked.structured_content is not None
        request_id = asked.structured_content["request_id"]
        await wait_line(phone, re.compile(rf"ANSWERED \[{request_id}\] 0"))
        reply = await client.call_tool("check_reply", {"request_id": request_id, "wait_seconds": 10})
        assert reply.structured_content is not None
        assert (reply.structured_content["status"], reply.structured_content["choice_index"]) == (
            "answered",
            0,
        )

        rang = await client.call_tool("find_my_phone", {})
        assert not rang.is_error, rang
        await wait_line(phone, re.compile(r"RING for 60 s"))

        filed = await client.call_tool("send_file", {"filename": "notes.md", "content": f"# from {mode}"})
        assert not filed.is_error, filed
        saved = await wait_line(phone, re.compile(r"SAVED (.+)$"))
        assert await anyio.Path(saved.group(1)).read_text() == f"# from {mode}"
        assert Path(saved.group(1)).parent == downloads

        devices = await client.call_tool("list_devices", {})
        assert devices.structured_content is not None
        assert [d["name"] for d in devices.structured_content["devices"]] == ["Pixel"]


@pytest.mark.parametrize("asked", ["client_secret_post", "client_secret_basic"])
async def test_a_client_asking_to_be_confidential_is_registered_public_and_connects(
    relaybox_server: str, cli: Cli, asked: Literal["client_secret_post", "client_secret_basic"]
) -> None:
    """Claude.ai's connector registers with client_secret_post (anthropics/claude-ai-mcp#1043):
    relaybox registers it as the public client it will treat it as and says so (RFC 7591 3.2.1);
    the SDK's client then completes the whole flow without a secret."""
    registered = cli.run("phone", "register", "--name", "Pixel")
    assert registered.returncode == 0, registered
    storage = MemoryStorage()
    async with httpx2.AsyncClient(follow_redirects=False, timeout=30) as browser_http:
        browser = ApprovingBrowser(relaybox_server, browser_http, cli_confirmer(cli.run))
        provider = oauth_provider(relaybox_server, storage, browser, auth_method=asked)
        async with (
            httpx2.AsyncClient(auth=provider, timeout=httpx2.Timeout(30, read=60)) as http,
            Client(streamable_http_client(f"{relaybox_server}/mcp", http_client=http)) as client,
        ):
            with anyio.fail_after(60):
                tools = await client.list_tools()
    assert len(tools.tools) == 11
    assert storage.client_info is not None
    assert storage.client_info.token_endpoint_auth_method == "none"
    assert storage.client_info.client_secret is None


async def test_without_a_token_mcp_answers_401_with_the_metadata_and_a_scope_hint(
    relaybox_server: str,
) -> None:
    async with httpx2.AsyncClient(timeout=10) as http:
        response = await http.post(
            f"{relaybox_server}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}
        )
        in_query = await http.post(f"{relaybox_server}/mcp?access_token=abc", json={})
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert f'resource_metadata="{relaybox_server}/.well-known/oauth-protected-resource/mcp"' in challenge
    assert 'scope="' in challenge
    assert in_query.status_code == 400


async def wait_line(process: BackgroundCli, pattern: re.Pattern[str], within: float = 10) -> re.Match[str]:
    return await anyio.to_thread.run_sync(lambda: process.wait_for_line(pattern, within))
