"""Long polls and live pushes over a real socket: a waiting poll returns the moment the phone
answers; a ring or reminder reaches the phone's open stream without being kept."""

from __future__ import annotations

import base64
import json
import time

import anyio
import httpx
import pytest

from core.domain.envelope import open_envelope
from core.runtime.core import Core
from tests.helpers import FakeDevice, create_token, register_phone
from tests.sse import events, next_data_event

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def setup(http: httpx.Client, scope: str | None = None) -> tuple[FakeDevice, dict[str, str]]:
    phone = register_phone(http)
    fields = {"scope": scope} if scope else {}
    return phone, {"Authorization": f"Bearer {create_token(http, phone, **fields)['token']}"}


async def test_a_waiting_poll_returns_as_soon_as_the_phone_answers(live_server: str) -> None:
    with httpx.Client(base_url=live_server, timeout=10) as http:
        phone, headers = setup(http)
        created = http.post("/v1/interactions", json={"question": "ok?"}, headers=headers).json()
        answered_at: list[float] = []

        async def answer_later() -> None:
            await anyio.sleep(0.3)
            answered_at.append(time.monotonic())
            await anyio.to_thread.run_sync(
                lambda: http.post(
                    f"/v1/interactions/{created['id']}/answer", json={"choice_index": 1}, headers=phone.auth
                ).raise_for_status()
            )

        async with (
            httpx.AsyncClient(base_url=live_server, timeout=30) as client,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(answer_later)
            with anyio.fail_after(10):
                polled = await client.get(f"/v1/interactions/{created['id']}?wait=20", headers=headers)
            returned_at = time.monotonic()
    assert polled.json()["status"] == "answered" and polled.json()["choice_index"] == 1
    assert returned_at - answered_at[0] < 1.0


async def test_a_poll_with_nothing_happening_returns_pending_after_its_wait(live_server: str) -> None:
    with httpx.Client(base_url=live_server, timeout=10) as http:
        _, headers = setup(http)
        created = http.post("/v1/interactions", json={"question": "ok?"}, headers=headers).json()
        started = time.monotonic()
        async with httpx.AsyncClient(base_url=live_server, timeout=30) as client:
            polled = await client.get(f"/v1/interactions/{created['id']}?wait=1", headers=headers)
    assert polled.json()["status"] == "pending"
    assert 0.9 < time.monotonic() - started < 5


async def test_ring_and_reminders_reach_an_open_stream_as_queue_entries(live_server: str, core: Core) -> None:
    with httpx.Client(base_url=live_server, timeout=10) as http:
        phone, headers = setup(http, scope="phone:control")
        async with httpx.AsyncClient(base_url=live_server, timeout=10) as client:
            async with client.stream("GET", "/v1/sync", headers=phone.auth) as response:
                stream = events(response)
                with anyio.fail_after(5):
                    await anext(stream)  # the opening comment: subscribed
                ring = http.post(f"/v1/devices/{phone.device_id}/ring", headers=headers).json()
                with anyio.fail_after(5):
                    rang = await next_data_event(stream)
                at = int(core.clock.now()) + 120
                http.post(
                    "/v1/reminders", json={"message": "stand up", "at": at}, headers=headers
                ).raise_for_status()
                with anyio.fail_after(5):
                    armed = await next_data_event(stream)
    assert ring["warnings"] == [
        "the phone has never reported its app version, so support for this is uncertain",
        "the phone has no push registration; the ring goes to its open stream",
    ]
    # Both are queued now (a phone that is offline gets them when it reconnects): they carry ids.
    assert (rang.event, rang.json["type"], rang.json["durationS"]) == ("push", "ring", "60")
    assert rang.id is not None and int(rang.id) == rang.json["seq"]
    assert (armed.event, armed.json["type"], armed.json["from"]) == ("envelope", "reminder", "server")
    assert armed.id is not None and int(armed.id) > int(rang.id)
    reminder = json.loads(
        open_envelope(base64.b64decode(armed.json["blob"]), phone.secret_key, core.keys.public_key)
    )
    assert (reminder["message"], reminder["fire_at"]) == ("stand up", at)


async def test_a_poll_whose_caller_hangs_up_stops_waiting(live_server: str, core: Core) -> None:
    from core.adapters.fanout.memory import MemoryFanout
    from core.services.interactions import answered_topic

    fanout = core.fanout
    assert isinstance(fanout, MemoryFanout)
    with httpx.Client(base_url=live_server, timeout=10) as http:
        _, headers = setup(http)
        created = http.post("/v1/interactions", json={"question": "ok?"}, headers=headers).json()
    topic = answered_topic(created["id"])
    async with httpx.AsyncClient(base_url=live_server, timeout=httpx.Timeout(10, read=0.5)) as client:
        with pytest.raises(httpx.ReadTimeout):
            await client.get(f"/v1/interactions/{created['id']}?wait=30", headers=headers)
    with anyio.fail_after(5):
        while fanout.subscriber_count(topic):  # noqa: ASYNC110 - another thread's loop owns the state
            await anyio.sleep(0.05)
