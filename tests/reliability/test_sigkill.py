"""A replica killed with SIGKILL while a device follows its stream and a caller long-polls, then
started again (SQLite; PostgreSQL with Redis): the caller's poll fails at once with a dropped
connection, never hangs; the device reconnects by itself and receives every envelope the server
had accepted (202), none twice; an answered question stays answered and a pending one can still
be answered and polled."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import TRACEBACK, RelayboxServer
from tests.reliability.instances import PrivateRedis, free_port
from tests.reliability.traffic import (
    FAST_KEEPALIVE_ENV,
    Follower,
    LongPoll,
    answer,
    ask,
    eventually,
    gauge,
    make_account,
    post_envelope,
)
from tests.services import fresh_postgres_database, replica_env

pytestmark = pytest.mark.e2e


@pytest.fixture(params=["sqlite", "postgres+redis"])
def backend_env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    if request.param == "sqlite":
        yield {}
        return
    with fresh_postgres_database() as database_url, PrivateRedis() as redis_server:
        backend = {"RELAYBOX_DATABASE_URL": database_url, "RELAYBOX_REDIS_URL": redis_server.url}
        yield backend | replica_env(tmp_path / "objects")


def test_a_replica_killed_mid_traffic_loses_nothing_it_accepted(
    tmp_path: Path, backend_env: dict[str, str], summary: Callable[[str], None]
) -> None:
    port = free_port()
    env = FAST_KEEPALIVE_ENV | backend_env
    backend = "postgres+redis" if backend_env else "sqlite"
    with ExitStack() as stack:
        first = stack.enter_context(RelayboxServer(tmp_path / "server", env=env, port=port))
        url = first.wait_until_ready()
        http = stack.enter_context(httpx.Client(base_url=url, timeout=10, trust_env=False))
        account = make_account(http)
        follower = Follower(url, account.computer)
        stack.callback(follower.close)

        accepted = [post_envelope(http, account.phone, account.computer).json()["seq"] for _ in range(5)]
        follower.wait_for(set(accepted), 10)
        answered_id, pending_id = ask(http, account, "Deploy?"), ask(http, account, "Roll back?")
        answer(http, account, answered_id, 1)
        poll = LongPoll(url, account, pending_id)
        eventually(lambda: gauge(http, "relaybox_waiting_polls") >= 1, 10, "the long poll is waiting")
        accepted += [post_envelope(http, account.phone, account.computer).json()["seq"] for _ in range(5)]

        first.process.kill()
        killed_at = time.monotonic()
        first.process.wait(10)
        outcome = poll.result(10)
        assert isinstance(outcome, httpx.HTTPError), outcome  # the connection dropped: no response at all
        assert poll.ended_at - killed_at < 2.0
        assert TRACEBACK not in first.stderr(), first.stderr()
        first.stop()

        second = stack.enter_context(RelayboxServer(tmp_path / "server", env=env, port=port))
        assert second.wait_until_ready() == url
        # Live envelopes may all have arrived before the kill: wait for the reconnect itself, then
        # relay one more through the new process, so the replay after Last-Event-ID is exercised.
        eventually(lambda: follower.connections >= 2, 20, "the follower reconnected")
        accepted.append(post_envelope(http, account.phone, account.computer).json()["seq"])
        follower.wait_for(set(accepted), 20)
        assert sorted(follower.seqs) == sorted(set(follower.seqs)), "an envelope arrived twice"

        kept = http.get(
            f"/v1/interactions/{answered_id}", params={"wait": 0}, headers=account.token_auth
        ).json()
        assert (kept["status"], kept["choice_index"]) == ("answered", 1)
        retried = LongPoll(url, account, pending_id)
        eventually(lambda: gauge(http, "relaybox_waiting_polls") >= 1, 10, "the retried long poll is waiting")
        answer(http, account, pending_id, 0)
        response = retried.result(10)
        assert isinstance(response, httpx.Response) and response.json()["status"] == "answered"
        second.stop()
        assert TRACEBACK not in second.stderr(), second.stderr()
    summary(
        f"faults[SIGKILL, {backend}]: {len(accepted)} accepted envelopes all delivered after restart "
        f"({follower.connections} connections), long poll failed fast ({type(outcome).__name__}), "
        "answered stayed answered"
    )
