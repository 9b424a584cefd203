"""Urgent until acknowledged through the mcp SDK's own client: send_notification takes repeat and
expire (and says when to use them: never for routine updates) and returns the receipt;
check_receipt reports the phone's acknowledgement (waiting for it when asked) and cancel_receipt
stops the alarm. The phone acknowledges over the REST device route."""

from __future__ import annotations

import anyio
import httpx
import pytest
from mcp import Client

from connector.mcp_server import build_mcp
from core.principal import SCOPE_DEVICES_READ
from core.runtime.core import Core
from tests.connector.mcp_calls import grant, structured, tool_error
from tests.helpers import FakeDevice

pytestmark = pytest.mark.anyio
URGENT = {"message": "prod is down", "priority": "urgent"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_the_tools_say_when_an_alarm_is_warranted(assistant: Client) -> None:
    tools = {tool.name: tool for tool in (await assistant.list_tools()).tools}
    send = tools["send_notification"]
    assert {"repeat", "expire"} <= set(send.input_schema["properties"])
    assert "receipt" in send.output_schema["properties"]  # type: ignore[index]
    description = " ".join((send.description or "").split())
    for words in ("repeat", "until they respond", "never for routine updates", "check_receipt"):
        assert words in description, words
    assert tools["check_receipt"].annotations.read_only_hint is True  # type: ignore[union-attr]
    assert tools["cancel_receipt"].annotations.idempotent_hint is True  # type: ignore[union-attr]
    assert "acknowledged" in (tools["check_receipt"].description or "")


async def test_the_phone_acknowledges_while_check_receipt_waits(
    assistant: Client, rest: httpx.AsyncClient, phone: FakeDevice
) -> None:
    sent = await structured(assistant, "send_notification", URGENT | {"repeat": 60, "expire": 600})
    receipt = sent["receipt"]
    assert receipt.startswith("rcp_")
    state = await structured(assistant, "check_receipt", {"receipt": receipt})
    assert (state["status"], state["acknowledged_by"]) == ("pending", None)

    async def acknowledge_soon() -> None:
        await anyio.sleep(0.3)
        acked = await rest.post(f"/v1/receipts/{receipt}/acknowledge", headers=phone.auth)
        assert acked.status_code == 200, acked.text

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(acknowledge_soon)
        with anyio.fail_after(20):
            waited = await structured(assistant, "check_receipt", {"receipt": receipt, "wait_seconds": 15})
    # As REST's GET /v1/receipts/{id} gives it: the device's id and name.
    by = {"device_id": phone.device_id, "name": "Pixel"}
    assert (waited["status"], waited["acknowledged_by"]) == ("acknowledged", by)
    assert waited["acknowledged_at"] is not None


async def test_cancel_receipt_stops_the_alarm_and_repeats_safely(assistant: Client) -> None:
    receipt = (await structured(assistant, "send_notification", URGENT | {"repeat": 30}))["receipt"]
    first = await structured(assistant, "cancel_receipt", {"receipt": receipt})
    again = await structured(assistant, "cancel_receipt", {"receipt": receipt})
    assert first["status"] == again["status"] == "cancelled"
    assert (await structured(assistant, "check_receipt", {"receipt": receipt}))["status"] == "cancelled"


async def test_mistakes_are_tool_errors_with_their_codes(
    assistant: Client, core: Core, phone: FakeDevice
) -> None:
    plain = await structured(assistant, "send_notification", {"message": "build green"})
    assert plain["receipt"] is None
    for arguments, code in [
        ({"priority": "high", "repeat": 60}, "repeat_requires_urgent"),
        ({"priority": "urgent", "repeat": 5}, "invalid_repeat"),
        ({"priority": "urgent", "repeat": 60, "expire": 20_000}, "invalid_expire"),
    ]:
        text = await tool_error(assistant, "send_notification", {"message": "m", **arguments})
        assert text.startswith(f"{code}: "), text
    unknown = await tool_error(assistant, "check_receipt", {"receipt": "rcp_" + "0" * 32})
    assert unknown.startswith("receipt_not_found: ")
    receipt = (await structured(assistant, "send_notification", URGENT | {"repeat": 60}))["receipt"]
    # A grant without notifications:send may not look at receipts (the auth gate refuses such a call
    # over HTTP first; the operation holds the same line).
    async with Client(build_mcp(core, lambda: grant(phone, frozenset({SCOPE_DEVICES_READ})))) as narrow:
        refused = await tool_error(narrow, "check_receipt", {"receipt": receipt})
    assert refused.startswith("insufficient_scope: ")


async def test_a_tokens_receipt_is_out_of_a_grants_reach_and_back(
    assistant: Client, rest: httpx.AsyncClient, phone: FakeDevice
) -> None:
    created = await rest.post("/v1/tokens", json={"label": "ci"}, headers=phone.auth)
    token = {"Authorization": f"Bearer {created.json()['token']}"}
    by_token = await rest.post("/v1/send", json=URGENT | {"repeat": 60}, headers=token)
    token_receipt = by_token.json()["receipt"]
    for tool in ("check_receipt", "cancel_receipt"):
        refused = await tool_error(assistant, tool, {"receipt": token_receipt})
        assert refused.startswith("receipt_not_found: "), refused
    grant_receipt = (await structured(assistant, "send_notification", URGENT | {"repeat": 60}))["receipt"]
    for answer in (
        await rest.get(f"/v1/receipts/{grant_receipt}", headers=token),
        await rest.post(f"/v1/receipts/{grant_receipt}/cancel", headers=token),
    ):
        assert (answer.status_code, answer.json()["error"]["code"]) == (404, "receipt_not_found")
    assert (await rest.get(f"/v1/receipts/{token_receipt}", headers=token)).json()["status"] == "pending"
    assert (await structured(assistant, "check_receipt", {"receipt": grant_receipt}))["status"] == "pending"
