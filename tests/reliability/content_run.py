"""One end-to-end run that carries marked content through every route and tool that takes content,
against a real ``relaybox serve``, and keeps every credential the run used.

Each content-carrying door is a function in ``REST_DOORS`` or ``TOOL_DOORS``, listed with the
operations or tools it covers: it sends fresh markers in every content field and says which of them
must reach a device (the proof that the content really went through the server). A new route or
tool is one more function and one more entry; until then the coverage check
fails for it. The privacy test then looks for the markers where the server keeps bytes;
the secrets test looks for the credentials in the logs.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.connector.sdk_oauth import ApprovingBrowser, MemoryStorage, cli_confirmer, oauth_provider
from tests.e2e.conftest import BackgroundCli, Cli, CliResult
from tests.oauth.flow import refresh

CODE_LINE = re.compile(r"^pairing code: ([0-9]{6})$")
HTTP_TIMEOUT_S = 30.0
DELIVERY_TIMEOUT_S = 40.0
# What the server is started with for a content run: 2 s reminders.
SERVER_ENV = {"RELAYBOX_REMINDER_MIN_LEAD_S": "2"}


@dataclass
class Markers:
    """Unique, unguessable strings, each named after where it was sent."""

    run: str = field(default_factory=lambda: "zq" + secrets.token_hex(5))
    delivered: dict[str, str] = field(default_factory=dict)  # must reach the phone or computer
    withheld: dict[str, str] = field(default_factory=dict)  # sent, but refused or never forwarded

    def new(self, where: str, *, reaches_a_device: bool = True) -> str:
        marker = f"{self.run}x{len(self.delivered) + len(self.withheld):03d}"
        (self.delivered if reaches_a_device else self.withheld)[marker] = where
        return marker

    @property
    def all(self) -> dict[str, str]:
        return self.delivered | self.withheld


@dataclass
class Caller:
    """What a door may use: the sender token's HTTP client, the phone, the CLI."""

    http: httpx.Client
    token: str
    phone_id: str
    cli: Cli
    markers: Markers


def ok(result: CliResult) -> CliResult:
    assert result.returncode == 0, result
    return result


def expect(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, (response.request.url.path, response.status_code, response.text)
    body: dict[str, Any] = response.json() if response.content else {}
    return body


# -- REST doors ------------------------------------------------------------------------------------


def send_json(c: Caller) -> None:
    m = c.markers
    expect(
        c.http.post(
            "/v1/send",
            json={
                "message": m.new("send.message"),
                "title": m.new("send.title"),
                "tags": [m.new("send.tags")],
                "url": f"https://example.com/{m.new('send.url')}",
                "url_title": m.new("send.url_title"),
                "actions": [
                    {
                        "label": m.new("send.actions.label"),
                        "url": f"https://example.com/{m.new('send.actions.url')}",
                    },
                    {
                        "action": "http",
                        "label": m.new("send.actions.http_label"),
                        "url": f"https://example.com/{m.new('send.actions.http_url')}",
                        "body": m.new("send.actions.http_body"),
                    },
                ],
                "icon": f"https://example.com/{m.new('send.icon')}.png",
                "sequence_id": m.new("send.sequence_id"),
            },
        ),
        200,
    )


def clear_notification(c: Caller) -> None:
    sequence_id = c.markers.new("clear.sequence_id")
    expect(c.http.delete(f"/v1/notifications/{sequence_id}"), 200)


def send_path_token(c: Caller) -> None:
    body = c.markers.new("send_path_token.body")
    expect(c.http.post(f"/v1/send/{c.token}", content=body, headers={"Authorization": ""}), 200)


def pushover_shim(c: Caller) -> None:
    m = c.markers
    fields = {
        "token": c.token,
        "user": "ignored",
        "message": m.new("pushover.message"),
        "title": m.new("pushover.title"),
        "url": f"https://example.com/{m.new('pushover.url')}",
        "url_title": m.new("pushover.url_title"),
    }
    response = c.http.post("/v1/messages.json", data=fields, headers={"Authorization": ""})
    assert expect(response, 200)["status"] == 1


def ntfy_publish(c: Caller) -> None:
    """ntfy's publish (headers, a query, a topic and a sequence in the path) and its JSON publish;
    the paths are caller's words a text access log must not show."""
    m = c.markers
    topic, sequence = m.new("ntfy.topic"), m.new("ntfy.sequence_id")  # the topic is the title here
    headers = {"X-Tags": m.new("ntfy.tags"), "Click": f"https://example.com/{m.new('ntfy.click')}"}
    expect(c.http.put(f"/{topic}/{sequence}", content=m.new("ntfy.message").encode(), headers=headers), 200)
    expect(c.http.get(f"/{m.new('ntfy.webhook_topic')}/publish", params={"m": m.new("ntfy.query")}), 200)
    body = {"topic": "door", "title": m.new("ntfy.json_title"), "message": m.new("ntfy.json_message")}
    expect(c.http.post("/", json=body), 200)


def gotify_message(c: Caller) -> None:
    m = c.markers
    body = {"title": m.new("gotify.title"), "message": m.new("gotify.message"), "priority": 5}
    expect(c.http.post("/message", json=body), 200)


def reminders(c: Caller) -> None:
    m = c.markers
    expect(
        c.http.post(
            "/v1/reminders", json={"message": m.new("reminders.message"), "at": int(time.time()) + 3}
        ),
        201,
    )
    cancelled = m.new("reminders.cancelled_message", reaches_a_device=False)  # cancelled before it fires
    armed = expect(
        c.http.post("/v1/reminders", json={"message": cancelled, "at": int(time.time()) + 3600}), 201
    )
    expect(c.http.delete(f"/v1/reminders/{armed['reminder_id']}"), 202)


def interactions(c: Caller) -> None:
    m = c.markers
    asked = c.http.post(
        "/v1/interactions",
        json={
            "question": m.new("interactions.question"),
            "choices": [m.new("interactions.choice0"), m.new("interactions.choice1")],
            "idempotency_key": m.new("interactions.idempotency_key", reaches_a_device=False),
        },
    )
    interaction = expect(asked, 201)
    answered = expect(c.http.get(f"/v1/interactions/{interaction['id']}", params={"wait": 20}), 200)
    assert answered["status"] == "answered", answered


def urgent_receipt(c: Caller) -> None:
    """An urgent notification that repeats until acknowledged, then cancelled: its receipt keeps
    ids and times only."""
    m = c.markers
    fields = {"message": m.new("urgent.message"), "title": m.new("urgent.title"), "priority": "urgent"}
    sent = expect(c.http.post("/v1/send", json=fields | {"repeat": 60}), 200)
    expect(c.http.post(f"/v1/receipts/{sent['receipt']}/cancel"), 200)


def ring(c: Caller) -> None:
    expect(c.http.post(f"/v1/devices/{c.phone_id}/ring"), 202)


def documents_refused_to_a_sender_token(c: Caller) -> None:
    m = c.markers
    body = {
        "filename": m.new("documents.filename", reaches_a_device=False) + ".txt",
        "content": m.new("documents.content", reaches_a_device=False),
    }
    expect(c.http.post("/v1/documents", json=body), 404)  # the specification's plain 404


def relayed_envelopes(c: Caller) -> None:
    ok(c.cli.run("phone", "send", c.markers.new("envelopes.phone_to_computer")))
    ok(c.cli.run("send-text", c.markers.new("envelopes.computer_to_phone")))


def file_transfer(c: Caller) -> None:
    """The computer sends a file to the phone (its name and content marked); `phone run` saves it."""
    m = c.markers
    outbox = c.cli.workdir / "outbox"
    outbox.mkdir(exist_ok=True)
    source = outbox / f"{m.new('file_transfer.filename')}.txt"
    source.write_text(f"content {m.new('file_transfer.content')}\n" * 2000)  # several KB: more than one line
    ok(c.cli.run("send-file", source))


Door = Callable[[Caller], None]
# Each door with the operations ("METHOD /path" as in /openapi.json) it sends content through.
REST_DOORS: list[tuple[Door, tuple[str, ...]]] = [
    (send_json, ("POST /v1/send",)),
    (send_path_token, ("POST /v1/send/{token}",)),
    (clear_notification, ("DELETE /v1/notifications/{sequence_id}",)),
    (pushover_shim, ("POST /v1/messages.json",)),
    (ntfy_publish, ()),  # other services' APIs, served outside /openapi.json
    (gotify_message, ()),
    (reminders, ("POST /v1/reminders", "DELETE /v1/reminders/{reminder_id}")),
    (interactions, ("POST /v1/interactions",)),
    (urgent_receipt, ("POST /v1/receipts/{receipt_id}/cancel",)),
    (ring, ("POST /v1/devices/{device_id}/ring",)),
    (documents_refused_to_a_sender_token, ()),  # not a documented route: a plain 404 to every caller
    (relayed_envelopes, ("POST /v1/envelopes",)),
    (
        file_transfer,
        (
            "POST /v1/transfers",
            "POST /v1/transfers/{transfer_id}/upload-urls",
            "PUT /v1/objects/{transfer_id}/{index}",
            "POST /v1/transfers/{transfer_id}/download-urls",
        ),
    ),
]
# Operations that take a body but no caller content: what they carry is kept by design (keys,
# names, labels, status) or is a secret the secrets check looks for.
WITHOUT_CONTENT: dict[str, str] = {
    "POST /v1/devices": "a device's public key, name, push registration and invite",
    "POST /v1/invites": "nothing: a phone asks for an invite",
    "PATCH /v1/devices/me": "a device's push registration, name and app build",
    "POST /v1/devices/me/push-registration": "the echo of a registration challenge",
    "POST /v1/devices/me/status": "battery, charging, ringer and network",
    "POST /v1/pair/init": "a public key and a device name",
    "POST /v1/pair/confirm": "a pairing code and a public key",
    "POST /v1/tokens": "a sender token's label, scope and priority cap",
    "POST /v1/users/validate.json": "a sender token and a Pushover user key",
    "POST /v1/interactions/{interaction_id}/answer": "a choice index",
    "POST /v1/receipts/{receipt_id}/acknowledge": "nothing but the receipt's id",
    "POST /v1/receipts/{receipt_id}/cancel.json": "a sender token and the receipt's id",
}

# -- MCP tools -------------------------------------------------------------------------------------


async def tool(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(name, arguments)
    assert not result.is_error and result.structured_content is not None, (name, result)
    structured: dict[str, Any] = result.structured_content
    return structured


async def tool_send_notification(client: Client, m: Markers) -> None:
    await tool(
        client,
        "send_notification",
        {
            "message": m.new("tool.send.message"),
            "title": m.new("tool.send.title"),
            "tags": [m.new("tool.send.tags")],
            "sequence_id": m.new("tool.send.sequence_id"),
            "actions": [
                {
                    "action": "http",
                    "label": m.new("tool.send.actions.label"),
                    "url": f"https://example.com/{m.new('tool.send.actions.url')}",
                    "body": m.new("tool.send.actions.body"),
                }
            ],
        },
    )
    await tool(client, "clear_notification", {"sequence_id": m.new("tool.clear.sequence_id")})


async def tool_reminders(client: Client, m: Markers) -> None:
    await tool(client, "remind_me", {"message": m.new("tool.remind_me.message"), "at": int(time.time()) + 3})
    later = m.new("tool.remind_me.cancelled", reaches_a_device=False)
    armed = await tool(client, "remind_me", {"message": later, "at": int(time.time()) + 3600})
    await tool(client, "cancel_reminder", {"reminder_id": armed["reminder_id"]})


async def tool_approval(client: Client, m: Markers) -> None:
    asked = await tool(
        client,
        "request_approval",
        {
            "question": m.new("tool.request_approval.question"),
            "choices": [m.new("tool.request_approval.choice0"), m.new("tool.request_approval.choice1")],
            "idempotency_key": m.new("tool.request_approval.idempotency_key", reaches_a_device=False),
        },
    )
    reply = await tool(client, "check_reply", {"request_id": asked["request_id"], "wait_seconds": 20})
    assert reply["status"] == "answered", reply


async def tool_send_file(client: Client, m: Markers) -> None:
    filename = m.new("tool.send_file.filename") + ".md"
    await tool(client, "send_file", {"filename": filename, "content": m.new("tool.send_file.content")})


async def tool_urgent(client: Client, m: Markers) -> None:
    fields = {"message": m.new("tool.urgent.message"), "priority": "urgent", "repeat": 60}
    receipt = (await tool(client, "send_notification", fields))["receipt"]
    assert (await tool(client, "check_receipt", {"receipt": receipt}))["status"] == "pending"
    assert (await tool(client, "cancel_receipt", {"receipt": receipt}))["status"] == "cancelled"


async def tool_ring_and_list(client: Client, _m: Markers) -> None:
    await tool(client, "find_my_phone", {})
    await tool(client, "list_devices", {})


ToolDoor = Callable[[Client, Markers], Awaitable[None]]
TOOL_DOORS: list[tuple[ToolDoor, tuple[str, ...]]] = [
    (tool_send_notification, ("send_notification", "clear_notification")),
    (tool_reminders, ("remind_me", "cancel_reminder")),
    (tool_approval, ("request_approval", "check_reply")),
    (tool_send_file, ("send_file",)),
    (tool_urgent, ("check_receipt", "cancel_receipt")),
    (tool_ring_and_list, ("find_my_phone", "list_devices")),
]

# -- the run ---------------------------------------------------------------------------------------


@dataclass
class ContentRun:
    """What a run sent and used: the markers and every credential, by kind."""

    markers: Markers = field(default_factory=Markers)
    credentials: dict[str, str] = field(default_factory=dict)
    received: str = ""  # everything the phone and the computer printed or saved


def run_everything(server_url: str, cli: Cli, workdir: Path) -> ContentRun:
    """Register a phone, pair a computer, make a sender token, connect an assistant; send marked
    content through every door; wait until each delivered marker arrived."""
    run = ContentRun()
    ok(cli.run("phone", "register", "--name", "Pixel", "--app-build", "100"))
    token = ok(
        cli.run("phone", "tokens", "create", "--label", "script", "--scope", "phone:control")
    ).stdout.strip()
    pairing = cli.start("pair", "--name", "laptop", "--timeout", "60")
    ok(cli.run("phone", "pair", pairing.wait_for_line(CODE_LINE)[1]))
    ok(pairing.finish())
    phone_state = json.loads((cli.state_dir / "phone.json").read_text())
    computer_state = json.loads((cli.state_dir / "computer.json").read_text())
    run.credentials |= {
        "sender token": token,
        "phone device credential": phone_state["device_token"],
        "computer device credential": computer_state["device_token"],
    }
    downloads = workdir / "Downloads"
    phone = cli.start("phone", "run", "--json", "--answer", "0", "--downloads", str(downloads))
    computer = cli.start("tail", "--json")
    with httpx.Client(
        base_url=server_url,
        headers={"Authorization": f"Bearer {token}"},
        timeout=HTTP_TIMEOUT_S,
        trust_env=False,
    ) as http:
        wait_for_stream(http, phone)
        caller = Caller(http, token, phone_state["device_id"], cli, run.markers)
        for door, _routes in REST_DOORS:
            door(caller)
        anyio.run(_through_the_connector, server_url, cli, run)
        refreshed = _refresh_once(http, run)
        run.credentials |= refreshed
    run.received = wait_for_delivery(run.markers, [phone, computer], downloads)
    return run


def wait_for_stream(http: httpx.Client, phone: BackgroundCli) -> None:
    """Ring and reminders reach only an open stream: wait until a notification arrives."""
    check = f"stream-check-{time.monotonic_ns()}"
    expect(http.post("/v1/send", json={"message": check}), 200)
    phone.wait_for_line(re.compile(re.escape(check)))


async def _through_the_connector(server_url: str, cli: Cli, run: ContentRun) -> None:
    storage = MemoryStorage()
    async with httpx2.AsyncClient(follow_redirects=False, timeout=30) as browser_http:
        browser = ApprovingBrowser(server_url, browser_http, cli_confirmer(cli.run))
        provider = oauth_provider(server_url, storage, browser)
        async with (
            httpx2.AsyncClient(auth=provider, timeout=httpx2.Timeout(30, read=60)) as http,
            Client(streamable_http_client(f"{server_url}/mcp", http_client=http)) as client,
        ):
            with anyio.fail_after(120):
                for tool_door, _tools in TOOL_DOORS:
                    await tool_door(client, run.markers)
    assert storage.tokens is not None and storage.client_info is not None
    codes = [parse_qs(urlsplit(location).query).get("code", [""])[0] for location in browser.locations]
    assert codes and all(codes), browser.locations
    run.credentials |= {
        "OAuth authorization code": codes[0],
        "OAuth access token": storage.tokens.access_token,
        "OAuth refresh token": storage.tokens.refresh_token or "",
        "OAuth client id": str(storage.client_info.client_id),
    }


def _refresh_once(http: httpx.Client, run: ContentRun) -> dict[str, str]:
    """Use the refresh token once (rotation), so the token endpoint's refresh path is logged too."""
    client_id = run.credentials.pop("OAuth client id")
    response = refresh(http, client_id, run.credentials["OAuth refresh token"])
    assert response.status_code == 200, response.text
    tokens = response.json()
    return {
        "rotated OAuth access token": tokens["access_token"],
        "rotated OAuth refresh token": tokens["refresh_token"],
    }


def wait_for_delivery(markers: Markers, devices: list[BackgroundCli], downloads: Path) -> str:
    """Everything the devices printed and saved, once it holds every delivered marker."""
    deadline = time.monotonic() + DELIVERY_TIMEOUT_S
    while True:
        received = "".join(device.stdout_so_far() for device in devices)
        if downloads.exists():
            received += "".join(f"{path.name}\n{path.read_text()}\n" for path in downloads.iterdir())
        missing = {marker: where for marker, where in markers.delivered.items() if marker not in received}
        if not missing:
            return received
        if time.monotonic() > deadline:
            raise AssertionError(f"never reached a device: {sorted(missing.values())}\nreceived: {received}")
        time.sleep(0.2)
