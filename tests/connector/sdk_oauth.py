"""The mcp SDK's own OAuth client, with a stand-in browser that approves the consent page the way
a person does: open it, read the code, confirm it on the (virtual) phone, tick, Allow."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from pydantic import AnyUrl

from tests.oauth.flow import parse_consent_page

CALLBACK = "http://127.0.0.1:3030/callback"  # registered by the SDK, never listened on
ConfirmOnPhone = Callable[[str], Awaitable[str]]  # code -> what the phone printed


class MemoryStorage:
    """The SDK's ``TokenStorage``, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class ApprovingBrowser:
    """The SDK's redirect and callback handlers: approves every consent page it is sent to."""

    def __init__(
        self,
        server: str,
        browser: httpx2.AsyncClient,
        confirm: ConfirmOnPhone,
        untick: frozenset[str] = frozenset(),
    ) -> None:
        self.server = server
        self.browser = browser
        self.confirm = confirm
        self.untick = untick
        self.locations: list[str] = []
        self.confirmations: list[str] = []

    async def open(self, authorization_url: str) -> None:
        page = await self.browser.get(authorization_url)
        assert page.status_code == 200, page.text
        consent = parse_consent_page(page.text)
        self.confirmations.append(await self.confirm(consent.code))
        status = await self.browser.get(self.server + consent.status_url, params={"wait": 10})
        assert status.json()["status"] == "confirmed", status.text
        requested = parse_qs(urlsplit(authorization_url).query)["scope"][0].split()
        decision = await self.browser.post(
            self.server + consent.decision_url,
            data={
                "csrf_token": consent.csrf_token,
                "decision": "allow",
                "scope": [s for s in requested if s not in self.untick],
            },
        )
        assert decision.status_code == 302, decision.text
        self.locations.append(decision.headers["location"])

    async def callback(self) -> AuthorizationCodeResult:
        query = parse_qs(urlsplit(self.locations[-1]).query)
        return AuthorizationCodeResult(code=query["code"][0], state=query["state"][0], iss=query["iss"][0])


def oauth_provider(
    server: str, storage: MemoryStorage, browser: ApprovingBrowser, client_name: str = "relaybox tests"
) -> OAuthClientProvider:
    return OAuthClientProvider(
        server_url=f"{server}/mcp",
        client_metadata=OAuthClientMetadata(
            client_name=client_name, redirect_uris=[AnyUrl(CALLBACK)], token_endpoint_auth_method="none"
        ),
        storage=storage,
        redirect_handler=browser.open,
        callback_handler=browser.callback,
    )


def cli_confirmer(run: Callable[..., object]) -> ConfirmOnPhone:
    """Confirm codes with ``relaybox phone connect`` through a blocking CLI runner."""

    async def confirm(code: str) -> str:
        result = await anyio.to_thread.run_sync(lambda: run("phone", "connect", code))
        assert getattr(result, "returncode", 1) == 0, result
        return str(getattr(result, "stdout", ""))

    return confirm
