"""The eleven tools through the mcp SDK's own client, in process: names, schemas, annotations,
results, and core errors as isError results that start with the stable code."""

from __future__ import annotations

import base64
import dataclasses
import inspect
import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client

from app.assembly import create_app
from connector import outputs
from connector.mcp_server import build_mcp
from connector.tool_set import TOOLS
from connector.tools import TOOL_SCOPES, bind
from core.domain.envelope import open_envelope
from core.domain.keys import generate_keypair
from core.errors import RelayError
from core.principal import CONNECTOR_SCOPES, Principal
from core.runtime.core import Core
from core.services import interactions
from tests.helpers import FakeDevice, b64

pytestmark = pytest.mark.anyio
EXPECTED_TOOLS = [
    "cancel_receipt",
    "cancel_reminder",
    "check_receipt",
    "check_reply",
    "clear_notification",
    "find_my_phone",
    "list_devices",
    "remind_me",
    "request_approval",
    "send_file",
    "send_notification",
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def client(core: Core) -> AsyncIterator[httpx.AsyncClient]:
    """The REST API in this test's event loop (the Core's fan-out wakes waiters of one loop)."""
    transport = httpx.ASGITransport(app=create_app(core=core))
    async with core, httpx.AsyncClient(transport=transport, base_url="http://relaybox.test") as rest:
        yield rest


@pytest.fixture
async def phone(client: httpx.AsyncClient) -> FakeDevice:
    secret, public = generate_keypair()
    body = (await client.post("/v1/devices", json={"public_key": b64(public), "app_build": 1})).json()
    return FakeDevice(body["device_id"], body["device_token"], secret, public, body["account_id"])


@pytest.fixture
def grant(phone: FakeDevice) -> Principal:
    return Principal.connector_grant(
        account_id=phone.account_id,
        client_id="client-1",
        grant_id="grant-1",
        scopes=frozenset(CONNECTOR_SCOPES),
    )


@pytest.fixture
async def mcp_client(core: Core, grant: Principal, client: httpx.AsyncClient) -> AsyncIterator[Client]:
    async with Client(build_mcp(core, lambda: grant)) as session:
        yield session


def text_of(result: Any) -> str:
    return str(result.content[0].text)


async def test_tools_list_is_the_eleven_tools_with_schemas_in_a_stable_order(mcp_client: Client) -> None:
    first = await mcp_client.list_tools()
    second = await mcp_client.list_tools(cache_mode="refresh")
    names = [tool.name for tool in first.tools]
    assert sorted(names) == EXPECTED_TOOLS
    assert names == [tool.name for tool in second.tools]
    for tool in first.tools:
        assert tool.output_schema is not None, tool.name
        assert tool.description and len(tool.description) > 40, tool.name
        assert tool.annotations is not None, tool.name
    by_name = {tool.name: tool for tool in first.tools}
    assert by_name["list_devices"].annotations.read_only_hint is True  # type: ignore[union-attr]
    assert by_name["send_notification"].annotations.idempotent_hint is False  # type: ignore[union-attr]
    assert by_name["remind_me"].input_schema["required"] == ["message", "at"]
    assert "ctx" not in json.dumps(by_name["request_approval"].input_schema)


async def test_the_listing_is_the_declarations_and_the_scopes_derive_from_them(mcp_client: Client) -> None:
    listed = (await mcp_client.list_tools()).tools
    assert [tool.name for tool in listed] == [tool.name for tool in TOOLS]
    for declared, tool in zip(TOOLS, listed, strict=True):
        assert tool.title == declared.title, tool.name
        assert tool.description == inspect.cleandoc(declared.operation.__doc__ or ""), tool.name
        assert tool.annotations == declared.annotations, tool.name
        assert tool.output_schema == declared.output.model_json_schema(), tool.name
        assert "call" not in tool.input_schema["properties"], tool.name
    assert {tool.name: tool.scope for tool in TOOLS} == TOOL_SCOPES
    assert set(TOOL_SCOPES.values()) <= set(CONNECTOR_SCOPES)
    # The waits stop where the core's long poll does, and check_reply's default is the REST one.
    by_name = {
        tool.name: tool.input_schema["properties"]["wait_seconds"]
        for tool in listed
        if tool.name in {"check_reply", "request_approval"}
    }
    assert {schema["maximum"] for schema in by_name.values()} == {interactions.WAIT_MAX_S}
    assert by_name["check_reply"]["default"] == interactions.WAIT_DEFAULT_S


async def test_a_declaration_whose_output_is_not_what_its_function_returns_is_refused(
    core: Core, grant: Principal
) -> None:
    wrong = dataclasses.replace(TOOLS[0], output=outputs.Reply)
    with pytest.raises(TypeError, match=r"^send_notification returns"):
        bind(wrong, core, lambda: grant)


async def test_send_notification_encrypts_to_the_phone(
    mcp_client: Client, core: Core, phone: FakeDevice
) -> None:
    result = await mcp_client.call_tool("send_notification", {"message": "build is green", "title": "CI"})
    assert result.is_error is False
    structured = result.structured_content
    assert structured is not None and structured["id"].startswith("msg_")
    assert structured["delivered_to"] == [{"device_id": phone.device_id, "type": "phone"}]


async def test_a_notification_that_reaches_no_device_is_an_error_the_model_cannot_miss(
    mcp_client: Client,
) -> None:
    result = await mcp_client.call_tool("send_notification", {"message": "hello", "device": "fridge"})
    assert result.is_error is True
    assert text_of(result).startswith("no_matching_device: ")


async def test_a_core_error_is_an_error_result_starting_with_its_code(
    mcp_client: Client, client: httpx.AsyncClient, phone: FakeDevice
) -> None:
    await client.delete("/v1/devices/me", headers=phone.auth)
    result = await mcp_client.call_tool("send_notification", {"message": "hello"})
    assert result.is_error is True
    assert text_of(result).startswith("no_phone_device: ")


async def test_bad_arguments_are_tool_errors_not_protocol_errors(mcp_client: Client) -> None:
    wrong_type = await mcp_client.call_tool("remind_me", {"message": "m", "at": "tomorrow"})
    assert wrong_type.is_error is True
    too_soon = await mcp_client.call_tool("remind_me", {"message": "m", "at": 1})
    assert too_soon.is_error is True and text_of(too_soon).startswith("fire_at_too_soon: ")
    long_choice = await mcp_client.call_tool(
        "request_approval", {"question": "q", "choices": ["a", "b" * 60]}
    )
    assert long_choice.is_error is True and text_of(long_choice).startswith("invalid_arguments: ")
    unknown = await mcp_client.call_tool("launch_missiles", {})
    assert unknown.is_error is True


async def test_remind_me_and_cancel(mcp_client: Client, core: Core) -> None:
    at = int(core.clock.now()) + 3600
    armed = await mcp_client.call_tool("remind_me", {"message": "stretch", "at": at})
    assert armed.structured_content is not None
    assert armed.structured_content["fire_at"] == at
    # The phone has no push service and no stream open: the model is told, as the REST caller is.
    assert any("no open connection" in w for w in armed.structured_content["warnings"])
    cancelled = await mcp_client.call_tool(
        "cancel_reminder", {"reminder_id": armed.structured_content["reminder_id"]}
    )
    assert cancelled.structured_content is not None
    assert cancelled.structured_content["status"] == "cancel_requested"
    assert any("no open connection" in w for w in cancelled.structured_content["warnings"])
    iso = await mcp_client.call_tool("remind_me", {"message": "iso", "at": "2027-01-16T09:00:00+01:00"})
    assert iso.structured_content is not None and iso.structured_content["fire_at"] == 1_800_086_400
    naive = await mcp_client.call_tool("remind_me", {"message": "iso", "at": "2027-01-16T09:00:00"})
    assert naive.is_error is True and text_of(naive).startswith("invalid_arguments: at: ")
    malformed = await mcp_client.call_tool("cancel_reminder", {"reminder_id": "rmd_nope"})
    assert text_of(malformed).startswith("invalid_reminder_id: ")


async def test_request_approval_then_check_reply_sees_the_tap(
    mcp_client: Client, client: httpx.AsyncClient, phone: FakeDevice
) -> None:
    asked = await mcp_client.call_tool("request_approval", {"question": "Merge?", "choices": ["Yes", "No"]})
    assert asked.structured_content is not None
    request_id = asked.structured_content["request_id"]
    assert asked.structured_content["created"] is True and asked.structured_content["status"] == "pending"
    again = await mcp_client.call_tool("request_approval", {"question": "Merge?", "choices": ["Yes", "No"]})
    assert again.structured_content is not None and again.structured_content["created"] is False
    await client.post(f"/v1/interactions/{request_id}/answer", json={"choice_index": 0}, headers=phone.auth)
    reply = await mcp_client.call_tool("check_reply", {"request_id": request_id, "wait_seconds": 0})
    assert reply.structured_content is not None
    assert (reply.structured_content["status"], reply.structured_content["choice_index"]) == ("answered", 0)


async def test_request_approval_can_wait_for_the_answer_with_progress(
    mcp_client: Client, client: httpx.AsyncClient, phone: FakeDevice, core: Core
) -> None:
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    async def tap_when_asked() -> None:
        for _ in range(200):
            pending = await anyio.to_thread.run_sync(_pending_interaction_id, core)
            if pending:
                await client.post(
                    f"/v1/interactions/{pending}/answer", json={"choice_index": 1}, headers=phone.auth
                )
                return
            await anyio.sleep(0.05)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(tap_when_asked)
        with anyio.fail_after(20):
            result = await mcp_client.call_tool(
                "request_approval", {"question": "Ship?", "wait_seconds": 10}, progress_callback=on_progress
            )
    assert result.structured_content is not None
    assert (result.structured_content["status"], result.structured_content["choice_index"]) == ("answered", 1)
    assert seen  # at least one progress notification while waiting


def _pending_interaction_id(core: Core) -> str | None:
    from sqlmodel import Session, select

    from core.store.tables import Interaction

    with Session(core.engine) as session:
        row = session.exec(select(Interaction)).first()
        return row.interaction_id if row else None


async def test_list_devices_find_my_phone_and_send_file(
    mcp_client: Client, client: httpx.AsyncClient, core: Core, phone: FakeDevice
) -> None:
    listing = await mcp_client.call_tool("list_devices", {})
    assert listing.structured_content is not None
    assert [d["device_id"] for d in listing.structured_content["devices"]] == [phone.device_id]
    rang = await mcp_client.call_tool("find_my_phone", {})
    assert rang.structured_content is not None and rang.structured_content["status"] == "requested"
    sent = await mcp_client.call_tool("send_file", {"filename": "notes.md", "content": "# hi"})
    assert sent.structured_content is not None
    document_id = sent.structured_content["document_id"]
    pulled = (await client.get(f"/v1/documents/{document_id}", headers=phone.auth)).json()
    document = json.loads(
        open_envelope(base64.b64decode(pulled["blob"]), phone.secret_key, core.keys.public_key)
    )
    assert (document["filename"], document["content"]) == ("notes.md", "# hi")
    refused = await mcp_client.call_tool("send_file", {"filename": "x.html", "content": "<b>"})
    assert text_of(refused).startswith("invalid_filename: ")


async def test_a_grant_without_the_scope_gets_insufficient_scope_from_the_tool(
    core: Core, phone: FakeDevice, client: httpx.AsyncClient
) -> None:
    narrow = Principal.connector_grant(
        account_id=phone.account_id, client_id="c", grant_id="g", scopes=frozenset({"devices:read"})
    )
    async with Client(build_mcp(core, lambda: narrow)) as session:
        result = await session.call_tool("find_my_phone", {})
    assert result.is_error is True and text_of(result).startswith("insufficient_scope: ")


async def test_the_grant_is_read_inside_the_call_so_its_failure_is_a_tool_error(
    core: Core, client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    def no_token() -> Principal:
        raise RelayError("invalid_token")

    def broken() -> Principal:
        raise RuntimeError("secret detail")

    async with Client(build_mcp(core, no_token)) as session:
        refused = await session.call_tool("list_devices", {})
    assert refused.is_error is True and text_of(refused).startswith("invalid_token: ")
    async with Client(build_mcp(core, broken)) as session:
        crashed = await session.call_tool("find_my_phone", {})
    assert text_of(crashed) == "internal_error: Something went wrong on our side."
    assert "connector tool find_my_phone failed unexpectedly" in caplog.text
