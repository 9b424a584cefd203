"""The assistant's OAuth client for ``relaybox demo``: the ``mcp`` SDK's own ``OAuthClientProvider``
with its tokens kept in memory (``MemoryStorage``) and a browser that approves each consent page
the way a person does (``ConsentBrowser``: open the page, have the phone confirm its code, tick the
scopes, choose Allow).

The tests drive the SDK's OAuth client with the same pieces (``tests/connector/sdk_oauth.py``).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from html import unescape
from typing import Literal
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from pydantic import AnyUrl

from demo.narration import DemoError

CALLBACK = "http://127.0.0.1:3030/callback"  # registered with the server, never listened on
CLIENT_NAME = "relaybox demo"
ConfirmOnPhone = Callable[[str], Awaitable[str]]  # the code on the page -> what the phone printed


@dataclass(frozen=True)
class ConsentPage:
    session_id: str
    code: str
    csrf_token: str
    client_name: str

    @property
    def status_url(self) -> str:
        return f"/oauth/consent/{self.session_id}/status"

    @property
    def decision_url(self) -> str:
        return f"/oauth/consent/{self.session_id}/decision"


def parse_consent_page(html: str) -> ConsentPage:
    session = re.search(r'data-status-url="/oauth/consent/([^/"]+)/status"', html)
    code = re.search(r'<output id="code">(\d{3}) (\d{3})</output>', html)
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', html)
    name = re.search(r'<span id="client-name">([^<]*)</span>', html)
    if not (session and code and csrf and name):
        raise DemoError("the consent page lacks its code, status link or CSRF token")
    return ConsentPage(session[1], code[1] + code[2], unescape(csrf[1]), unescape(name[1]))


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


class ConsentBrowser:
    """The SDK's redirect and callback handlers, approving every consent page as a person would:
    open the page, read the code, have the phone confirm it (``confirm``), wait until the page
    knows, tick every requested scope but ``untick``, choose Allow, and hand back the redirect.
    ``say`` narrates each step; a failure is also kept in ``failure`` (the SDK may wrap it)."""

    def __init__(
        self,
        server: str,
        browser: httpx2.AsyncClient,
        confirm: ConfirmOnPhone,
        untick: frozenset[str] = frozenset(),
        say: Callable[[str], None] = lambda _text: None,
    ) -> None:
        self.server = server
        self.browser = browser
        self.confirm = confirm
        self.untick = untick
        self.say = say
        self.locations: list[str] = []
        self.confirmations: list[str] = []
        self.failure: str | None = None
        self.allowed: list[str] = []  # the scopes the last consent allowed

    async def open(self, authorization_url: str) -> None:
        try:
            await self._approve(authorization_url)
        except DemoError as error:
            self.failure = str(error)
            raise

    async def _approve(self, authorization_url: str) -> None:
        page = await self.browser.get(authorization_url)
        if page.status_code != 200:
            raise DemoError(f"the consent page answered HTTP {page.status_code}")
        consent = parse_consent_page(page.text)
        requested = parse_qs(urlsplit(authorization_url).query).get("scope", [""])[0].split()
        if self.allowed and (more := [scope for scope in requested if scope not in self.allowed]):
            self.say(f"the server answered 403 insufficient_scope: this needs {' '.join(more)}, which")
            self.say("the first consent did not ask for, so the client asks again (step-up)")
        spaced = f"{consent.code[:3]} {consent.code[3:]}"
        self.say(f'consent page: "{consent.client_name}" asks to connect; it shows the code {spaced}')
        self.confirmations.append(await self.confirm(consent.code))
        status = "pending"
        for _ in range(3):  # each poll waits up to 10 s for the phone, as the page's script does
            answer = await self.browser.get(self.server + consent.status_url, params={"wait": 10})
            status = str(answer.json().get("status")) if answer.status_code == 200 else "gone"
            if status != "pending":
                break
        if status != "confirmed":
            raise DemoError(f"the consent page never saw the phone's confirmation (status {status})")
        scopes = [scope for scope in requested if scope not in self.untick]
        self.say(f"the page now lists what it asks for; ticking all {len(scopes)} and choosing Allow:")
        self.say(f"  {' '.join(scopes)}")
        decision = await self.browser.post(
            self.server + consent.decision_url,
            data={"csrf_token": consent.csrf_token, "decision": "allow", "scope": scopes},
        )
        if decision.status_code != 302:
            raise DemoError(f"choosing Allow answered HTTP {decision.status_code}, not a redirect")
        self.locations.append(decision.headers["location"])
        self.allowed = scopes
        self.say("redirected back to the client with a one-time code; it trades it for tokens")

    async def callback(self) -> AuthorizationCodeResult:
        query = parse_qs(urlsplit(self.locations[-1]).query)
        if "code" not in query:
            raise DemoError(f"the redirect carries no code: {self.locations[-1]}")
        return AuthorizationCodeResult(
            code=query["code"][0], state=query.get("state", [None])[0], iss=query.get("iss", [None])[0]
        )


def oauth_provider(
    server: str,
    storage: MemoryStorage,
    browser: ConsentBrowser,
    client_name: str = CLIENT_NAME,
    auth_method: Literal["none", "client_secret_post", "client_secret_basic"] = "none",
) -> OAuthClientProvider:
    """The SDK's OAuth client for ``server``/mcp, registering itself as ``client_name`` and asking
    for ``auth_method`` (relaybox registers every client as public, ``none``, and says so)."""
    return OAuthClientProvider(
        server_url=f"{server}/mcp",
        client_metadata=OAuthClientMetadata(
            client_name=client_name,
            redirect_uris=[AnyUrl(CALLBACK)],
            token_endpoint_auth_method=auth_method,
        ),
        storage=storage,
        redirect_handler=browser.open,
        callback_handler=browser.callback,
    )
