"""Typed replies through the mcp SDK's own client: request_approval offers allow_text and
text_max_chars (and says when to use them), the phone's typed reply comes back as ``text`` in the
first result that reports the answer (check_reply, or request_approval's own wait) and never again."""

from __future__ import annotations

import base64
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client

from core.domain.envelope import PairBox
from core.domain.typed_reply import seal_typed_reply
from core.runtime.core import Core
from core.services import typed_replies
from tests.connector.mcp_calls import structured
from tests.helpers import FakeDevice, b64

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def answer(
    rest: httpx.AsyncClient,
    core: Core,
    phone: FakeDevice,
    request_id: str,
    text: str,
    choice: int | None = None,
) -> None:
    box = PairBox(phone.secret_key, core.keys.public_key)
    body: dict[str, Any] = {"sealed_text": b64(seal_typed_reply(box, interaction_id=request_id, text=text))}
    if choice is not None:
        body["choice_index"] = choice
    answered = await rest.post(f"/v1/interactions/{request_id}/answer", json=body, headers=phone.auth)
    assert answered.status_code == 200, answered.text


async def test_the_tool_offers_typed_replies_and_tells_the_model_when(assistant: Client) -> None:
    tools = {tool.name: tool for tool in (await assistant.list_tools()).tools}
    approval = tools["request_approval"]
    properties = approval.input_schema["properties"]
    assert properties["allow_text"]["default"] is False
    text_limit = next(
        branch for branch in properties["text_max_chars"]["anyOf"] if branch["type"] == "integer"
    )
    assert text_limit["maximum"] == typed_replies.TEXT_MAX_CHARS
    assert "allow_text" in (approval.description or "") and "reason" in (approval.description or "")
    assert "text" in (tools["check_reply"].description or "")
    for name in ("request_approval", "check_reply"):
        assert {"text", "text_already_read"} <= set(tools[name].output_schema["properties"])  # type: ignore[index]


async def test_a_denial_with_a_reason_comes_back_once_through_check_reply(
    assistant: Client, rest: httpx.AsyncClient, core: Core, phone: FakeDevice
) -> None:
    asked = await structured(
        assistant, "request_approval", {"question": "Drop the table?", "allow_text": True}
    )
    assert asked["status"] == "pending" and asked["text"] is None
    await answer(rest, core, phone, asked["request_id"], "we still need it", choice=1)
    reply = await structured(assistant, "check_reply", {"request_id": asked["request_id"], "wait_seconds": 0})
    assert (reply["status"], reply["choice_index"], reply["text"]) == ("answered", 1, "we still need it")
    again = await structured(assistant, "check_reply", {"request_id": asked["request_id"], "wait_seconds": 0})
    assert again["text"] is None and again["text_already_read"] is True


async def test_request_approval_waits_for_a_typed_reply_alone(
    assistant: Client, rest: httpx.AsyncClient, core: Core, phone: FakeDevice
) -> None:
    async def type_when_asked() -> None:
        for _ in range(200):
            interaction_id = await anyio.to_thread.run_sync(_asked, core)
            if interaction_id:
                await answer(rest, core, phone, interaction_id, "staging, please")
                return
            await anyio.sleep(0.05)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(type_when_asked)
        with anyio.fail_after(20):
            result = await structured(
                assistant,
                "request_approval",
                {
                    "question": "Where to?",
                    "choices": [],
                    "allow_text": True,
                    "text_max_chars": 50,
                    "wait_seconds": 10,
                },
            )
    assert (result["status"], result["choice_index"], result["text"]) == ("answered", None, "staging, please")
    later = await structured(
        assistant, "check_reply", {"request_id": result["request_id"], "wait_seconds": 0}
    )
    assert later["text"] is None and later["text_already_read"] is True


def _asked(core: Core) -> str | None:
    from sqlmodel import Session, select

    from core.store.tables import Interaction

    with Session(core.engine) as session:
        row = session.exec(select(Interaction)).first()
        return row.interaction_id if row else None


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"text_max_chars": 100}, "text_max_chars needs allow_text"),
        ({"allow_text": True, "choices": ["only"]}, "choices must be 2-4"),
        ({"allow_text": True, "text_max_chars": 1001}, "text_max_chars"),
    ],
)
async def test_typed_reply_arguments_out_of_bounds_are_tool_errors(
    assistant: Client, arguments: dict[str, Any], problem: str
) -> None:
    result = await assistant.call_tool("request_approval", {"question": "q", **arguments})
    assert result.is_error is True
    text = str(result.content[0].text)  # type: ignore[union-attr]
    assert text.startswith("invalid_arguments: ") and problem in text, text


async def test_without_allow_text_an_empty_choice_list_still_means_the_default_buttons(
    assistant: Client, core: Core, phone: FakeDevice, rest: httpx.AsyncClient
) -> None:
    asked = await structured(assistant, "request_approval", {"question": "Go?", "choices": []})
    refused = await rest.post(
        f"/v1/interactions/{asked['request_id']}/answer",
        json={"sealed_text": base64.b64encode(b"\x01" * 80).decode()},
        headers=phone.auth,
    )
    assert refused.json()["error"]["code"] == "choice_required"  # Approve / Deny, no text box
