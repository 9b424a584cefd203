"""The assistant's side of ``relaybox demo``: the ``mcp`` SDK's own client connects through the full
OAuth flow, its consent approved the way a person does it, then calls every tool while the virtual
phone shows what each one did.

``ConsentBrowser`` and ``MemoryStorage`` are reusable: the tests drive the SDK's OAuth client with
them (``tests/connector/sdk_oauth.py``).
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from html import unescape
from typing import Any, Literal, Protocol, TextIO
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from pydantic import AnyUrl

CALLBACK = "http://127.0.0.1:3030/callback"  # registered with the server, never listened on
CLIENT_NAME = "relaybox demo"
ConfirmOnPhone = Callable[[str], Awaitable[str]]  # the code on the page -> what the phone printed


class DemoError(Exception):
    """A step that did not go as it should; the message is the one line the demo prints."""


# The browser: consent the way a person gives it.


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


# Narration.


class Narrator:
    """Numbered steps, indented details and the phone's own lines; one locked write per line."""

    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        self.total = total
        self.number = 0
        self.name = ""
        self._stream = stream
        self._lock = threading.Lock()

    def step(self, title: str, name: str | None = None) -> None:
        """Start the next step; ``name`` (default: ``title`` up to a colon) is how errors name it."""
        self.number += 1
        self.name = name or title.split(":")[0]
        self.line(f"\n[{self.number}/{self.total}] {title}")

    def say(self, text: str) -> None:
        self.line(f"    {text}")

    def result(self, value: Any) -> None:
        self.line(f"    → {compact(value)}")

    def phone(self, text: str) -> None:
        self.line(f"    phone │ {text}")

    def line(self, text: str) -> None:
        with self._lock:
            stream = self._stream or sys.stdout
            stream.write(text + "\n")
            stream.flush()


def compact(value: Any, limit: int = 160) -> str:
    """``key=value, …`` with nulls left out and nested values in braces, cut at ``limit``."""
    text = _render(value)
    if isinstance(value, dict):
        text = text[1:-1]
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _render(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={_render(v)}" for k, v in value.items() if v is not None) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_render(item) for item in value) + "]"
    if isinstance(value, str):
        return value if value.isprintable() else json.dumps(value, ensure_ascii=False)
    return json.dumps(value)


# The tools, one after another.


class PhoneSide(Protocol):
    """The running virtual phone, as the steps see it."""

    def mark(self) -> int:
        """Where its output is now; ``wait_for`` looks at what comes after a mark."""

    async def wait_for(self, pattern: str, since: int, within: float = 15) -> re.Match[str]:
        """The first line after ``since`` matching ``pattern`` (``DemoError`` after ``within`` s)."""

    async def connect(self, code: str) -> str:
        """``relaybox phone connect CODE``: confirm a consent page's code; returns what it printed."""


async def connect_and_call_every_tool(server: str, phone: PhoneSide, say: Narrator) -> None:
    """Steps 3 to 11 of the demo: connect through OAuth, then call each of the eight tools."""
    say.step("Connecting an MCP client through OAuth, as an AI assistant does", "connecting through OAuth")
    say.say("it finds the server's OAuth metadata, registers itself and opens the consent page")
    async with httpx2.AsyncClient(follow_redirects=False, timeout=30, trust_env=False) as browser_http:
        browser = ConsentBrowser(server, browser_http, phone.connect, say=say.say)
        provider = oauth_provider(server, MemoryStorage(), browser)
        timeout = httpx2.Timeout(30, read=60)
        async with httpx2.AsyncClient(auth=provider, timeout=timeout, trust_env=False) as http:
            try:
                async with Client(streamable_http_client(f"{server}/mcp", http_client=http)) as client:
                    tools = await client.list_tools()
                    say.say(f"connected; the server offers {len(tools.tools)} tools")
                    await _call_tools(client, phone, say)
            except DemoError:
                raise
            except Exception as error:  # the SDK may wrap a failure of the browser in its own error
                raise DemoError(browser.failure or describe(error)) from error


def describe(error: BaseException) -> str:
    """An unexpected error as one line: its type and message (a lone error unwrapped from a group)."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


async def _call_tools(client: Client, phone: PhoneSide, say: Narrator) -> None:
    async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        say.say(f"calling {name}({compact(arguments)})")
        result = await client.call_tool(name, arguments)
        if result.is_error or result.structured_content is None:
            text = " ".join(getattr(part, "text", "") for part in result.content)
            raise DemoError(f"{name} failed: {text or 'no structured result'}")
        structured: dict[str, Any] = result.structured_content
        say.result(structured)
        return structured

    say.step("list_devices: which devices can the assistant reach?")
    await call("list_devices", {})

    say.step("send_notification: a notification on the phone")
    mark = phone.mark()
    await call("send_notification", {"title": "relaybox demo", "message": "Hello from your AI assistant"})
    await phone.wait_for(r"notification: relaybox demo", mark)

    say.step("remind_me: the phone fires the reminder itself; the server keeps nothing")
    mark = phone.mark()
    at = int(time.time()) + 6
    await call("remind_me", {"message": "Stretch your legs", "at": at})
    say.say(f"waiting for the phone to fire it at {datetime.fromtimestamp(at, UTC):%H:%M:%S} UTC …")
    await phone.wait_for(r"^REMINDER: Stretch your legs", mark, within=20)

    say.step("request_approval: a question with answer buttons (this phone taps the first)")
    mark = phone.mark()
    asked = await call("request_approval", {"question": "Deploy to production?", "choices": ["Yes", "No"]})
    await phone.wait_for(rf"^ANSWERED \[{re.escape(str(asked['request_id']))}\]", mark)

    say.step("check_reply: the assistant reads the answer")
    reply = await call("check_reply", {"request_id": asked["request_id"], "wait_seconds": 10})
    if reply.get("status") != "answered":
        raise DemoError(f"check_reply says {reply.get('status')}, not answered")
    say.say(f'choice_index {reply["choice_index"]} is "{["Yes", "No"][reply["choice_index"]]}"')

    say.step("find_my_phone: ring at full volume, even on silent")
    mark = phone.mark()
    await call("find_my_phone", {})
    await phone.wait_for(r"^RING for", mark)

    say.step("send_file: a text file into the phone's Downloads, encrypted to its key")
    mark = phone.mark()
    content = "# Notes\nSent by relaybox demo.\n"
    await call("send_file", {"filename": "demo-notes.md", "content": content})
    saved = await phone.wait_for(r"^SAVED (.+)$", mark)
    if await anyio.Path(saved[1]).read_text(encoding="utf-8") != content:
        raise DemoError(f"{saved[1]} does not hold what was sent")
    say.say(f"it landed at {saved[1]}, decrypted, byte for byte what was sent")

    say.step("cancel_reminder: set a second reminder a minute ahead, then cancel it")
    mark = phone.mark()
    second = await call("remind_me", {"message": "This one is cancelled", "at": int(time.time()) + 60})
    await phone.wait_for(r"^REMINDER SET", mark)
    await call("cancel_reminder", {"reminder_id": second["reminder_id"]})
    await phone.wait_for(r"^REMINDER CANCELLED", mark)
