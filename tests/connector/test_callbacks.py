"""Answer callbacks through the mcp SDK's own client: request_approval takes callback_url (and tells
the model to use it only for the user's own system), returns the callback_secret, and the answer
is POSTed to a real HTTPS receiver on loopback, signed (verified with the standardwebhooks
package); check_reply shows the delivery; a URL the server refuses is a tool error with its code."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

from core.adapters.outbound.resolver import StaticResolver
from core.bootstrap import build_core
from core.clock import ManualClock
from core.runtime.core import Core
from core.services import callback_delivery
from core.settings import Settings
from tests.connector.mcp_calls import structured
from tests.fakes.webhook_receiver import HOST_NAME, WebhookReceiver
from tests.helpers import FakeDevice

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[WebhookReceiver]:
    with WebhookReceiver(tmp_path) as running:
        yield running


@pytest.fixture
def core(settings: Settings, receiver: WebhookReceiver) -> Iterator[Core]:
    allowed = settings.model_copy(
        update={"callbacks_allow_private": True, "callbacks_ca_file": receiver.ca_file}
    )
    clock = ManualClock(float(int(time.time())))  # standardwebhooks checks timestamps against the real time
    built = build_core(allowed, clock=clock, resolver=StaticResolver({HOST_NAME: ["127.0.0.1"]}))
    yield built
    built.engine.dispose()


def documented_receiver() -> Callable[[str, dict[str, str], bytes], dict[str, Any]]:
    """The example receiver in docs/api.md, as written there."""
    page = (Path(__file__).parents[2] / "docs" / "api.md").read_text()
    block = page.split("<!-- callback receiver:", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    scope: dict[str, Any] = {}
    exec(compile(block, "docs/api.md", "exec"), scope)  # noqa: S102  (the project's own documentation)
    verify: Callable[[str, dict[str, str], bytes], dict[str, Any]] = scope["verified_event"]
    return verify


async def test_the_tool_offers_callback_url_and_tells_the_model_when(assistant: Client) -> None:
    tools = {tool.name: tool for tool in (await assistant.list_tools()).tools}
    approval = tools["request_approval"]
    assert "callback_url" in approval.input_schema["properties"]
    assert "callback_url" not in approval.input_schema.get("required", [])
    description = " ".join((approval.description or "").split())
    assert "Set callback_url only when the user asks for their own system" in description
    assert "Otherwise leave it out, and wait with wait_seconds or check_reply" in description
    assert approval.output_schema is not None
    assert "callback_secret" in approval.output_schema["properties"]
    reply = tools["check_reply"].output_schema
    assert reply is not None and "callback" in reply["properties"]


async def test_the_answer_is_posted_to_the_callback_url_and_check_reply_shows_it(
    assistant: Client, rest: httpx.AsyncClient, core: Core, phone: FakeDevice, receiver: WebhookReceiver
) -> None:
    asked = await structured(
        assistant,
        "request_approval",
        {"question": "Merge the release branch?", "callback_url": receiver.url()},
    )
    secret = asked["callback_secret"]
    assert secret.startswith("whsec_") and asked["status"] == "pending"
    request_id = asked["request_id"]
    answered = await rest.post(
        f"/v1/interactions/{request_id}/answer", json={"choice_index": 0}, headers=phone.auth
    )
    assert answered.status_code == 200, answered.text
    assert await callback_delivery.deliver_due(core) == 1
    (delivery,) = receiver.to("/hook")
    event = delivery.verified(secret)
    assert documented_receiver()(secret, delivery.headers, delivery.body) == event
    with pytest.raises(ValueError, match="bad signature"):
        documented_receiver()(secret, delivery.headers, delivery.body + b" ")
    assert (event["type"], event["data"]["id"], event["data"]["choice_index"]) == (
        "interaction.answered",
        request_id,
        0,
    )
    reply = await structured(assistant, "check_reply", {"request_id": request_id, "wait_seconds": 0})
    delivered = {"state": "delivered", "attempts": 1, "last_error": None, "last_status": 200}
    assert reply["callback"] == delivered
    assert "callback_secret" not in reply


async def test_a_refused_callback_url_is_a_tool_error_with_its_code(
    assistant: Client, core: Core, receiver: WebhookReceiver
) -> None:
    arguments = {"question": "Deploy?", "callback_url": "http://hooks.test/hook"}
    result = await assistant.call_tool("request_approval", arguments)
    assert result.is_error is True
    assert result.content[0].text.startswith("invalid_callback_url")  # type: ignore[union-attr]
    assert await callback_delivery.deliver_due(core) == 0
    assert receiver.received == []
