"""GET /v1/sync over a real socket: replay, live delivery, reconnect without gaps, revocation."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator

import anyio
import httpx
import pytest

from app.assembly import create_app
from core.bootstrap import build_core
from core.clock import ManualClock
from core.domain.envelope import open_envelope, seal
from core.runtime.core import Core
from core.settings import Settings
from tests.helpers import FakeDevice, Http, pair_computer, register_phone
from tests.live import serve_in_thread
from tests.sse import Event, events, next_data_event

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def fast_keepalive_core(settings: Settings, clock: ManualClock) -> Iterator[Core]:
    built = build_core(settings.model_copy(update={"stream_keepalive_s": 0.1}), clock=clock)
    yield built
    built.engine.dispose()


def relay(http: Http, sender: FakeDevice, recipient: FakeDevice, text: str) -> int:
    blob = base64.b64encode(seal(text.encode(), sender.secret_key, recipient.public_key)).decode()
    response = http.post(
        "/v1/envelopes",
        json={"to": recipient.device_id, "type": "clipboard", "blob": blob},
        headers=sender.auth,
    )
    assert response.status_code == 202, response.text
    seq: int = response.json()["seq"]
    return seq


def opened(event: Event, recipient: FakeDevice, sender: FakeDevice) -> str:
    data = event.json
    assert data["from"] == sender.device_id
    return open_envelope(base64.b64decode(data["blob"]), recipient.secret_key, sender.public_key).decode()


async def test_a_stream_replays_the_queue_then_delivers_live_envelopes(live_server: str) -> None:
    async with httpx.AsyncClient(base_url=live_server, timeout=10) as client:
        sync_http = httpx.Client(base_url=live_server, timeout=10)
        phone, computer = _pair(sync_http)
        first = _relay(sync_http, phone, computer, "queued while away")
        async with client.stream("GET", "/v1/sync", headers=computer.auth) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            stream = events(response)
            with anyio.fail_after(5):
                replayed = await next_data_event(stream)
            assert (replayed.id, replayed.event) == (str(first), "envelope")
            assert opened(replayed, computer, phone) == "queued while away"
            second = _relay(sync_http, phone, computer, "live")
            with anyio.fail_after(5):
                live = await next_data_event(stream)
            assert live.id == str(second) and opened(live, computer, phone) == "live"
        sync_http.close()


async def test_reconnecting_with_last_event_id_misses_nothing_and_repeats_nothing(live_server: str) -> None:
    sync_http = httpx.Client(base_url=live_server, timeout=10)
    phone, computer = _pair(sync_http)
    sent = [_relay(sync_http, phone, computer, f"m{n}") for n in range(10)]
    seen: list[int] = []
    async with httpx.AsyncClient(base_url=live_server, timeout=10) as client:
        async with client.stream("GET", "/v1/sync", headers=computer.auth) as response:
            stream = events(response)
            with anyio.fail_after(5):
                for _ in range(4):
                    seen.append(int((await next_data_event(stream)).id or 0))
        # the connection dropped mid-burst; more arrives while the computer is away
        sent += [_relay(sync_http, phone, computer, f"m{n}") for n in range(10, 15)]
        headers = {**computer.auth, "Last-Event-ID": str(seen[-1])}
        async with client.stream("GET", "/v1/sync", headers=headers) as response:
            stream = events(response)
            with anyio.fail_after(5):
                while len(seen) < len(sent):
                    seen.append(int((await next_data_event(stream)).id or 0))
    assert seen == sent
    sync_http.close()


async def test_since_id_takes_precedence_over_last_event_id(live_server: str) -> None:
    sync_http = httpx.Client(base_url=live_server, timeout=10)
    phone, computer = _pair(sync_http)
    sent = [_relay(sync_http, phone, computer, f"m{n}") for n in range(3)]
    async with httpx.AsyncClient(base_url=live_server, timeout=10) as client:
        headers = {**computer.auth, "Last-Event-ID": str(sent[0])}
        async with client.stream("GET", f"/v1/sync?since_id={sent[1]}", headers=headers) as response:
            with anyio.fail_after(5):
                assert (await next_data_event(events(response))).id == str(sent[2])
    sync_http.close()


async def test_a_token_update_arrives_as_its_own_event_encrypted_by_the_server(
    live_server: str, core: Core
) -> None:
    sync_http = httpx.Client(base_url=live_server, timeout=10)
    phone, computer = _pair(sync_http)
    sync_http.post("/v1/tokens", json={"label": "cron"}, headers=phone.auth).raise_for_status()
    async with httpx.AsyncClient(base_url=live_server, timeout=10) as client:
        async with client.stream("GET", "/v1/sync", headers=computer.auth) as response:
            with anyio.fail_after(5):
                event = await next_data_event(events(response))
    assert event.event == "token_update"
    assert event.json["from"] == "server"
    plaintext = open_envelope(base64.b64decode(event.json["blob"]), computer.secret_key, core.keys.public_key)
    update = json.loads(plaintext)
    assert update["type"] == "token_update"
    assert [token["label"] for token in update["tokens"]] == ["cron"]
    sync_http.close()


async def test_every_event_is_one_the_document_describes(live_server: str) -> None:
    """Found by fuzzing: the document described the stream as a string, but for text/event-stream the
    schema describes each event (its event, data and id fields)."""
    sync_http = httpx.Client(base_url=live_server, timeout=10)
    phone, computer = _pair(sync_http)
    seq = _relay(sync_http, phone, computer, "hello")
    sync_http.post("/v1/tokens", json={"label": "cron"}, headers=phone.auth).raise_for_status()
    document = sync_http.get("/openapi.json").json()
    schema = document["paths"]["/v1/sync"]["get"]["responses"]["200"]["content"]["text/event-stream"][
        "schema"
    ]
    async with httpx.AsyncClient(base_url=live_server, timeout=10) as client:
        async with client.stream("GET", "/v1/sync", headers=computer.auth) as response:
            stream = events(response)
            with anyio.fail_after(5):
                received = [await next_data_event(stream), await next_data_event(stream)]
    assert [(event.id, event.event) for event in received] == [
        (str(seq), "envelope"),
        (str(seq + 1), "token_update"),
    ]
    for event in received:
        assert event.event in schema["properties"]["event"]["enum"]
        assert re.fullmatch(schema["properties"]["id"]["pattern"], event.id or "")
        assert isinstance(event.json, dict)
    assert set(schema["required"]) == {"event", "data"}
    sync_http.close()


async def test_disconnecting_the_device_ends_its_stream_at_once(live_server: str) -> None:
    sync_http = httpx.Client(base_url=live_server, timeout=10)
    _, computer = _pair(sync_http)
    async with httpx.AsyncClient(base_url=live_server, timeout=10) as client:
        async with client.stream("GET", "/v1/sync", headers=computer.auth) as response:
            stream = events(response)
            with anyio.fail_after(5):
                await anext(stream)  # the opening comment: the stream is up
                assert sync_http.delete("/v1/devices/me", headers=computer.auth).status_code == 204
                async for _ in stream:
                    pass  # returns when the server closes the stream
    sync_http.close()


async def test_a_client_that_hangs_up_is_let_go_at_once_not_at_the_next_keep_alive(
    live_server: str, core: Core
) -> None:
    assert core.settings.stream_keepalive_s >= 15  # so a keep-alive write cannot be what notices
    sync_http = httpx.Client(base_url=live_server, timeout=10)
    _, computer = _pair(sync_http)
    async with httpx.AsyncClient(base_url=live_server, timeout=10) as client:
        async with client.stream("GET", "/v1/sync", headers=computer.auth) as response:
            with anyio.fail_after(5):
                await anext(events(response))  # the opening comment: the stream is up
            assert core.presence.open_streams == 1
            assert await core.presence.streaming([computer.device_id]) == {computer.device_id}
        # Leaving the block closes the connection while the stream waits for wake-ups.
    with anyio.fail_after(2):
        while core.presence.open_streams or await core.presence.streaming([computer.device_id]):  # noqa: ASYNC110 (server state)
            await anyio.sleep(0.02)
    sync_http.close()


async def test_an_idle_stream_sends_keep_alive_comments(fast_keepalive_core: Core) -> None:
    with serve_in_thread(create_app(core=fast_keepalive_core)) as url:
        sync_http = httpx.Client(base_url=url, timeout=10)
        _, computer = _pair(sync_http)
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            async with client.stream("GET", "/v1/sync", headers=computer.auth) as response:
                stream = events(response)
                with anyio.fail_after(5):
                    comments = 0
                    async for event in stream:
                        comments += event.comment
                        if comments >= 3:
                            break
        sync_http.close()


def _pair(http: httpx.Client) -> tuple[FakeDevice, FakeDevice]:
    phone = register_phone(http)
    return phone, pair_computer(http, phone)


def _relay(http: httpx.Client, sender: FakeDevice, recipient: FakeDevice, text: str) -> int:
    return relay(http, sender, recipient, text)
