"""The ``mcp`` SDK's own OAuth client completes discovery, registration, PKCE and the token
exchange against a real ``relaybox serve``, the consent confirmed by the virtual phone's CLI.

This test isolates the authorization server from the MCP transport (the real ``/mcp`` is driven
end to end in ``tests/e2e/test_connector_e2e.py``): a test-only transport answers ``<server>/mcp`` itself
(401 with ``WWW-Authenticate: Bearer resource_metadata=…`` without a valid token; 200 with one,
checked by ``oauth.tokens.verify_access_token`` against the server's own database) and passes
every other request (well-known documents, registration, authorize page, token) to the real
server. The authorize page is driven the way a browser would: GET it, read the code, confirm it
with ``relaybox phone connect``, wait for the status, POST the decision with its CSRF token.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import pytest

from core.bootstrap import build_core
from core.runtime.core import Core
from core.settings import explicit_settings
from oauth.tokens import verify_access_token
from tests.connector.sdk_oauth import ApprovingBrowser, MemoryStorage, cli_confirmer, oauth_provider
from tests.e2e.conftest import TRACEBACK, Cli, RelayboxServer
from tests.oauth.flow import ALL_SCOPES

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]
CALLBACK = "http://127.0.0.1:3030/callback"  # registered by the SDK, never listened on


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class ProtectedPlaceholder(httpx2.AsyncBaseTransport):
    """Stands in for the protected ``/mcp`` resource; forwards everything else to the server."""

    def __init__(self, server: str, core: Core) -> None:
        self.resource = f"{server}/mcp"
        self.metadata_url = f"{server}/.well-known/oauth-protected-resource/mcp"
        self.core = core
        self.inner = httpx2.AsyncHTTPTransport()
        self.seen_tokens: list[str] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if str(request.url.copy_with(query=None)) != self.resource:
            return await self.inner.handle_async_request(request)
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        verified = await verify_access_token(self.core, token) if scheme.lower() == "bearer" else None
        if verified is None or verified.resource != self.resource:
            challenge = f'Bearer error="invalid_token", resource_metadata="{self.metadata_url}"'
            return httpx2.Response(401, headers={"WWW-Authenticate": challenge}, request=request)
        self.seen_tokens.append(token)
        body = {"client_id": verified.client_id, "scopes": sorted(verified.principal.scopes)}
        return httpx2.Response(200, json=body, request=request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[str]:
    with RelayboxServer(tmp_path / "server") as running:
        yield await anyio.to_thread.run_sync(running.wait_until_ready)
    assert TRACEBACK not in running.stderr(), running.stderr()


async def test_the_mcp_sdk_oauth_client_connects_with_the_phone_confirming(
    server: str, tmp_path: Path
) -> None:
    cli = Cli(server, tmp_path / "cli")
    registered = await anyio.to_thread.run_sync(lambda: cli.run("phone", "register", "--name", "Pixel 9"))
    assert registered.returncode == 0, registered.stderr
    # Read the server's own database (its SQLite file and key) to verify tokens as /mcp will.
    core = build_core(explicit_settings(data_dir=tmp_path / "server" / "data", migrate_on_start=False))

    async with httpx2.AsyncClient(follow_redirects=False, timeout=30) as browser_http:
        browser = ApprovingBrowser(server, browser_http, cli_confirmer(cli.run))
        storage = MemoryStorage()
        provider = oauth_provider(server, storage, browser, client_name="sdk test client")
        resource = ProtectedPlaceholder(server, core)
        try:
            async with httpx2.AsyncClient(auth=provider, transport=resource, timeout=30) as http:
                with anyio.fail_after(60):
                    first = await http.get(f"{server}/mcp")
                assert first.status_code == 200, first.text
                assert first.json()["scopes"] == sorted(ALL_SCOPES)

                # An expired access token is refreshed by the SDK; the refresh token rotates.
                assert storage.tokens is not None
                spent_refresh = storage.tokens.refresh_token
                provider.context.token_expiry_time = time.time() - 1
                with anyio.fail_after(30):
                    second = await http.get(f"{server}/mcp")
                assert second.status_code == 200, second.text
        finally:
            core.engine.dispose()

    confirmations = browser.confirmations
    assert (
        confirmations and "sdk test client" in confirmations[0] and "approve on the page" in confirmations[0]
    )
    assert storage.client_info is not None
    assert storage.client_info.client_id.startswith("cli_")
    assert storage.client_info.client_secret is None
    assert storage.client_info.token_endpoint_auth_method == "none"
    assert storage.tokens is not None and storage.tokens.refresh_token not in (None, spent_refresh)
    assert len(resource.seen_tokens) == 2 and resource.seen_tokens[0] != resource.seen_tokens[1]
    assert parse_qs(urlsplit(browser.locations[0]).query)["iss"] == [server]
