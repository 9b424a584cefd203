"""A device that drops its stream mid-way: the server lets go of it (the open-streams gauge comes
back), logs nothing as a crash, and the device's reconnect with ``Last-Event-ID`` replays exactly
what came after, in order, without a gap or a repeat."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio
import httpx
import pytest

from tests.e2e.conftest import TRACEBACK, RelayboxServer
from tests.reliability.traffic import FAST_KEEPALIVE_ENV, eventually, gauge, make_account, post_envelope
from tests.sse import events, next_data_event

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_dropped_stream_is_cleaned_up_and_its_reconnect_replays_exactly(
    tmp_path: Path, summary: Callable[[str], None]
) -> None:
    with RelayboxServer(tmp_path / "server", env=FAST_KEEPALIVE_ENV) as server:
        url = server.wait_until_ready()
        with httpx.Client(base_url=url, timeout=10, trust_env=False) as http:
            account = make_account(http)
            computer = account.computer
            before = gauge(http, "relaybox_open_streams")
            sent = [post_envelope(http, account.phone, computer).json()["seq"] for _ in range(5)]

            async with httpx.AsyncClient(base_url=url, timeout=10, trust_env=False) as device:
                with anyio.fail_after(10):
                    async with device.stream(
                        "GET", "/v1/sync", params={"since_id": sent[0] - 1}, headers=computer.auth
                    ) as stream:
                        first = await next_data_event(events(stream))
                        assert int(first.id or 0) == sent[0]
                        assert gauge(http, "relaybox_open_streams") == before + 1
                    # Leaving the block closes the connection with four envelopes still to send.
            eventually(lambda: gauge(http, "relaybox_open_streams") == before, 10, "the stream was let go")
            sent += [post_envelope(http, account.phone, computer).json()["seq"] for _ in range(3)]

            replayed: list[int] = []
            async with httpx.AsyncClient(base_url=url, timeout=10, trust_env=False) as device:
                with anyio.fail_after(10):
                    headers = {**computer.auth, "Last-Event-ID": str(sent[0])}
                    async with device.stream("GET", "/v1/sync", headers=headers) as stream:
                        feed = events(stream)
                        while len(replayed) < len(sent) - 1:
                            event = await next_data_event(feed)
                            if event.event == "envelope":
                                replayed.append(int(event.id or 0))
            assert replayed == sent[1:]
            eventually(
                lambda: gauge(http, "relaybox_open_streams") == before, 10, "the second stream was let go"
            )
        server.stop()
    log = server.stderr() + server.stdout()
    assert TRACEBACK not in log and "ERROR" not in log, log
    summary(
        f"faults[client disconnect]: open streams back to {before:g}, replay after seq {sent[0]} "
        f"= {len(replayed)} envelopes, no gap, no repeat, no error logged"
    )
