"""send_notification's content and sequence, and clear_notification, through the mcp SDK's own
client: the schemas a model reads (and what the descriptions tell it), the payloads the phone
opens, and refusals with the same codes as POST /v1/send and DELETE /v1/notifications/{id}."""

from __future__ import annotations

import pytest
from mcp import Client

from connector.mcp_server import build_mcp
from connector.tools import TOOL_SCOPES
from core.principal import SCOPE_NOTIFICATIONS_SEND
from core.runtime.core import Core
from tests.connector.mcp_calls import grant, structured, tool_error
from tests.helpers import FakeDevice, queued_payloads

pytestmark = pytest.mark.anyio
HOOK = "https://hooks.example/retry"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_the_tools_offer_the_fields_and_say_when_to_use_them(assistant: Client) -> None:
    tools = {tool.name: tool for tool in (await assistant.list_tools()).tools}
    send, clear = tools["send_notification"], tools["clear_notification"]
    properties = send.input_schema["properties"]
    assert {"sequence_id", "markdown", "url_title", "icon", "actions"} <= set(properties)
    action = send.input_schema["$defs"]["ActionArg"]["properties"]
    assert action["action"]["enum"] == ["view", "http"] and action["action"]["default"] == "view"
    assert {"label", "url", "method", "body"} <= set(action)
    described = send.description or ""
    for words in ("sequence_id", "progress", "clear_notification", "markdown", "actions", "emoji"):
        assert words in described, words
    assert "sequence_id" in send.output_schema["properties"]  # type: ignore[index]
    assert clear.input_schema["required"] == ["sequence_id"]
    assert "no longer matters" in (clear.description or "")
    assert clear.annotations is not None and clear.annotations.idempotent_hint is True
    assert TOOL_SCOPES["clear_notification"] == TOOL_SCOPES["send_notification"] == SCOPE_NOTIFICATIONS_SEND


async def test_a_progressing_notification_then_its_clear(
    assistant: Client, core: Core, phone: FakeDevice
) -> None:
    actions = [
        {"label": "Open run", "url": "https://ci.example/run/7"},
        {"action": "http", "label": "Retry", "url": HOOK, "body": "job=7"},
    ]
    first = await structured(
        assistant,
        "send_notification",
        {"message": "1/2 **building**", "title": "Deploy", "sequence_id": "deploy-7", "markdown": True},
    )
    done = await structured(
        assistant,
        "send_notification",
        {
            "message": "2/2 done",
            "title": "Deploy",
            "sequence_id": "deploy-7",
            "tags": ["white_check_mark"],
            "url": "https://ci.example/run/7",
            "url_title": "Run 7",
            "icon": "https://ci.example/icon.png",
            "actions": actions,
        },
    )
    assert first["sequence_id"] == done["sequence_id"] == "deploy-7" and first["id"] != done["id"]
    progress, result = queued_payloads(core, phone, "notification")
    # The phone sees the sequence qualified by the sender, this connector grant.
    assert (progress["sequence_id"], progress["markdown"]) == ("grant-1:deploy-7", True)
    assert result["sequence_id"] == "grant-1:deploy-7" and "markdown" not in result
    assert (result["url_title"], result["icon"]) == ("Run 7", "https://ci.example/icon.png")
    assert result["actions"] == [
        {"action": "view", "label": "Open run", "url": "https://ci.example/run/7"},
        {"action": "http", "label": "Retry", "url": HOOK, "method": "POST", "body": "job=7"},
    ]

    cleared = await structured(assistant, "clear_notification", {"sequence_id": "deploy-7"})
    assert cleared == {
        "sequence_id": "deploy-7",
        "delivered_to": [{"device_id": phone.device_id, "type": "phone"}],
        "warnings": [],
    }
    [clear] = queued_payloads(core, phone, "notification_clear")
    assert (clear["type"], clear["sequence_id"]) == ("notification_clear", "grant-1:deploy-7")


async def test_without_a_sequence_id_the_result_names_the_notifications_id(
    assistant: Client, core: Core, phone: FakeDevice
) -> None:
    sent = await structured(assistant, "send_notification", {"message": "backup done"})
    assert sent["sequence_id"] == sent["id"]
    await structured(assistant, "clear_notification", {"sequence_id": sent["sequence_id"]})
    assert queued_payloads(core, phone, "notification_clear")[0]["sequence_id"] == f"grant-1:{sent['id']}"


async def test_refusals_carry_the_rest_codes(assistant: Client) -> None:
    bad_sequence = await tool_error(assistant, "send_notification", {"message": "m", "sequence_id": "a b"})
    assert bad_sequence.startswith("invalid_sequence_id: ")
    long_body = [{"action": "http", "label": "a", "url": HOOK, "body": "x" * 513}]
    assert (
        await tool_error(assistant, "send_notification", {"message": "m", "actions": long_body})
    ).startswith("invalid_action: ")
    get_with_body = [{"action": "http", "label": "a", "url": HOOK, "method": "GET", "body": "x"}]
    assert (
        await tool_error(assistant, "send_notification", {"message": "m", "actions": get_with_body})
    ).startswith("invalid_action: ")
    view_with_method = [{"label": "a", "url": HOOK, "method": "POST"}]
    assert (
        await tool_error(assistant, "send_notification", {"message": "m", "actions": view_with_method})
    ).startswith("invalid_action: ")
    four = [{"label": "a", "url": HOOK}] * 4
    assert (await tool_error(assistant, "send_notification", {"message": "m", "actions": four})).startswith(
        "invalid_action: "
    )
    http_icon = await tool_error(
        assistant, "send_notification", {"message": "m", "icon": "http://x.example/i.png"}
    )
    assert http_icon.startswith("invalid_icon: ")
    unknown_kind = [{"action": "broadcast", "label": "a", "url": HOOK}]
    assert await tool_error(assistant, "send_notification", {"message": "m", "actions": unknown_kind})
    assert (await tool_error(assistant, "clear_notification", {"sequence_id": "x" * 65})).startswith(
        "invalid_sequence_id: "
    )
    assert (await tool_error(assistant, "clear_notification", {"sequence_id": ""})).startswith(
        "invalid_sequence_id: "
    )
    nowhere = await tool_error(assistant, "clear_notification", {"sequence_id": "s", "device": "fridge"})
    assert nowhere.startswith("no_matching_device: ")


async def test_clearing_needs_the_scope_sending_needs(core: Core, phone: FakeDevice) -> None:
    narrow = grant(phone, frozenset({"devices:read"}))
    async with Client(build_mcp(core, lambda: narrow)) as session:
        result = await session.call_tool("clear_notification", {"sequence_id": "deploy-7"})
    assert result.is_error is True
    assert str(result.content[0].text).startswith("insufficient_scope: ")  # type: ignore[union-attr]
