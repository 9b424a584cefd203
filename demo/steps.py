"""The assistant's side of ``relaybox demo``: the ``mcp`` SDK's own client connects through the full
OAuth flow (``demo.oauth_client``), then calls every tool while the virtual phone shows what each
one did.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from typing import Any, Protocol

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from demo.narration import DemoError, Narrator, compact, describe
from demo.oauth_client import ConsentBrowser, MemoryStorage, oauth_provider


class PhoneSide(Protocol):
    """The running virtual phone, as the steps see it."""

    def mark(self) -> int:
        """Where its output is now; ``wait_for`` looks at what comes after a mark."""

    async def wait_for(self, pattern: str, since: int, within: float = 15) -> re.Match[str]:
        """The first line after ``since`` matching ``pattern`` (``DemoError`` after ``within`` s)."""

    async def connect(self, code: str) -> str:
        """``relaybox phone connect CODE``: confirm a consent page's code; returns what it printed."""


async def connect_and_call_every_tool(server: str, phone: PhoneSide, say: Narrator) -> None:
    """Steps 3 to 12 of the demo: connect through OAuth, then call nine of the tools (all but the
    urgent receipts' check_receipt and cancel_receipt)."""
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
    sent = await call(
        "send_notification", {"title": "relaybox demo", "message": "Hello from your AI assistant"}
    )
    await phone.wait_for(r"notification: relaybox demo", mark)

    say.step("clear_notification: take it away again, as a finished task clears its progress")
    mark = phone.mark()
    await call("clear_notification", {"sequence_id": sent["sequence_id"]})
    await phone.wait_for(rf"notification cleared: {re.escape(str(sent['sequence_id']))}$", mark)

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
