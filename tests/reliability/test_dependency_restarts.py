"""PostgreSQL and then Redis restarted under load, behind a real ``relaybox serve`` (private
instances, never the machine's shared servers). While one is down, callers get 503 ``unavailable``
at once — never a hang, never a 500; the server recovers by itself (pools reconnect, the fan-out
resubscribes: a long poll opened before the Redis restart wakes on an answer given after it); and
every envelope answered 202, before, during or after, reaches the device following its stream."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import TRACEBACK, RelayboxServer
from tests.reliability.instances import PrivatePostgres, PrivateRedis
from tests.reliability.traffic import (
    FAST_KEEPALIVE_ENV,
    Account,
    Follower,
    LongPoll,
    answer,
    ask,
    eventually,
    gauge,
    make_account,
    post_envelope,
)
from tests.services import replica_env

pytestmark = pytest.mark.e2e

NO_LIMITS = {
    f"RELAYBOX_LIMIT_{name}": "1000000"
    for name in ("TOKEN_BURST", "TOKEN_MONTHLY", "RECEIVER_DAILY", "IP_MINUTE", "IP_HOUR")
}
REQUEST_TIMEOUT_S = 10.0  # a request taking longer counts as a hang
INTERVAL_S = 0.05


class Load:
    """Envelopes from the phone and sends with the sender token, one every ``INTERVAL_S`` each, in
    two threads; every outcome is kept: a status, or the exception that ended the request."""

    def __init__(self, url: str, account: Account) -> None:
        self.statuses: Counter[int] = Counter()
        self.failures: list[str] = []
        self.accepted: set[int] = set()
        self.last_statuses: list[int] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(url, account, kind), daemon=True)
            for kind in ("envelope", "send")
        ]
        for thread in self._threads:
            thread.start()

    def _run(self, url: str, account: Account, kind: str) -> None:
        with httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT_S, trust_env=False) as http:
            while not self._stop.wait(INTERVAL_S):
                try:
                    if kind == "envelope":
                        response = post_envelope(http, account.phone, account.computer)
                    else:
                        response = http.post("/v1/send", json={"message": "load"}, headers=account.token_auth)
                except httpx.HTTPError as error:
                    self.failures.append(f"{kind}: {type(error).__name__}")
                    continue
                self.statuses[response.status_code] += 1
                self.last_statuses = [*self.last_statuses[-19:], response.status_code]
                if response.status_code == 503:
                    assert response.json()["error"]["code"] == "unavailable", response.text
                    assert response.headers["retry-after"]
                elif kind == "envelope" and response.status_code == 202:
                    self.accepted.add(response.json()["seq"])

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(REQUEST_TIMEOUT_S + 5)


def wait_ready(http: httpx.Client, timeout: float = 30) -> float:
    """Seconds until ``/readyz`` answers 200."""
    started = time.monotonic()
    eventually(lambda: http.get("/readyz").status_code == 200, timeout, "/readyz answered 200")
    return time.monotonic() - started


def test_postgres_and_redis_restarts_under_load_lose_nothing_and_never_500(
    tmp_path: Path, summary: Callable[[str], None]
) -> None:
    with PrivatePostgres() as postgres, PrivateRedis() as redis_server:
        env = (
            FAST_KEEPALIVE_ENV
            | NO_LIMITS
            | {"RELAYBOX_DATABASE_URL": postgres.url, "RELAYBOX_REDIS_URL": redis_server.url}
            | replica_env(tmp_path / "objects")
        )
        with RelayboxServer(tmp_path / "server", env=env) as server:
            url = server.wait_until_ready()
            with httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT_S, trust_env=False) as http:
                account = make_account(http)
                follower = Follower(url, account.computer)
                load = Load(url, account)
                try:
                    time.sleep(1.5)
                    postgres.stop("fast")
                    time.sleep(2.0)
                    during_postgres = load.statuses[503]
                    postgres.start()
                    postgres_recovery = wait_ready(http)

                    pending_id = ask(http, account, "Still there?")
                    poll = LongPoll(url, account, pending_id)
                    eventually(lambda: gauge(http, "relaybox_waiting_polls") >= 1, 10, "the long poll waits")
                    redis_server.kill()
                    accepted_before = len(load.accepted)
                    time.sleep(1.5)
                    accepted_without_redis = len(load.accepted) - accepted_before
                    redis_server.start()
                    redis_recovery = wait_ready(http)
                    time.sleep(1.0)  # the fan-out's reconnect backoff
                    answer(http, account, pending_id, 1)
                    answered_at = time.monotonic()
                    woken = poll.result(10)
                    assert isinstance(woken, httpx.Response) and woken.json()["status"] == "answered", woken
                    woken_after = poll.ended_at - answered_at
                    time.sleep(1.5)
                finally:
                    load.stop()
                follower.wait_for(load.accepted, 30)
                follower.close()
            server.stop()
    statuses = dict(load.statuses)
    assert not load.failures, load.failures
    assert set(statuses) <= {200, 202, 503}, (statuses, server.stderr()[-4000:])
    assert during_postgres > 0, "no request met the PostgreSQL outage"
    assert set(load.last_statuses) <= {200, 202}, load.last_statuses
    assert woken_after < 3.0, woken_after
    assert accepted_without_redis > 0, "no envelope was accepted while Redis was down"
    assert TRACEBACK not in server.stderr(), server.stderr()
    summary(
        f"faults[PostgreSQL and Redis restarts]: {sum(statuses.values())} requests {statuses}, "
        f"0 hangs, 0 500s; ready {postgres_recovery:.1f} s / {redis_recovery:.1f} s after each restart; "
        f"{len(load.accepted)} accepted envelopes ({accepted_without_redis} without Redis) all delivered; "
        f"long poll woke {woken_after:.2f} s after the answer"
    )
