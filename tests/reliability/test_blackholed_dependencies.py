"""PostgreSQL and then Redis black-holed (connections stay open, nothing ever answers) behind a real
``relaybox serve``: every request ends within a few seconds as 503 ``unavailable``, ``/readyz``
says which dependency is failing while ``/healthz`` stays up, a blackholed Redis costs its timeout
once and then fails fast (the circuit breaker), and once the path heals the same server serves
again, without a restart."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import TRACEBACK, RelayboxServer
from tests.reliability.blackhole import BlackholeProxy
from tests.reliability.instances import PrivatePostgres, PrivateRedis
from tests.reliability.traffic import Account, eventually, make_account
from tests.services import replica_env

pytestmark = pytest.mark.e2e

BOUND_S = 5.0  # the most any request may take while a dependency is black-holed
FAIL_FAST_S = 0.5  # a request once the breaker knows Redis is down
HANG_S = 30.0  # the client's own timeout: reaching it is a hang


def send(http: httpx.Client, account: Account) -> tuple[int, float]:
    """POST /v1/send: its status and how long it took; a 503 must be ``unavailable`` with Retry-After."""
    started = time.monotonic()
    response = http.post("/v1/send", json={"message": "ping"}, headers=account.token_auth)
    took = time.monotonic() - started
    if response.status_code == 503:
        assert response.json()["error"]["code"] == "unavailable", response.text
        assert int(response.headers["retry-after"]) >= 1
    return response.status_code, took


def readiness(http: httpx.Client) -> tuple[int, dict[str, str], float]:
    started = time.monotonic()
    response = http.get("/readyz")
    return response.status_code, response.json()["checks"], time.monotonic() - started


def recovers(http: httpx.Client, account: Account) -> float:
    """Seconds until /readyz is 200 and a send is delivered again."""
    started = time.monotonic()
    eventually(lambda: http.get("/readyz").status_code == 200, 30, "/readyz answered 200 again")
    eventually(lambda: send(http, account)[0] == 200, 30, "a send succeeded again")
    return time.monotonic() - started


def test_blackholed_postgres_and_redis_answer_503_within_seconds_and_recover_without_restart(
    tmp_path: Path, summary: Callable[[str], None]
) -> None:
    with (
        PrivatePostgres() as postgres,
        PrivateRedis() as redis_server,
        BlackholeProxy(postgres.port) as database_path,
        BlackholeProxy(redis_server.port) as redis_path,
    ):
        env = {
            "RELAYBOX_DATABASE_URL": database_path.url_for(postgres.url, postgres.port),
            "RELAYBOX_REDIS_URL": redis_path.url_for(redis_server.url, redis_server.port),
        } | replica_env(tmp_path / "objects")
        with (
            RelayboxServer(tmp_path / "server", env=env) as server,
            httpx.Client(base_url=server.wait_until_ready(), timeout=HANG_S, trust_env=False) as http,
        ):
            account = make_account(http)
            assert send(http, account)[0] == 200

            database_path.blackhole()
            database_sends = [send(http, account) for _ in range(3)]
            database_ready = readiness(http)
            alive = http.get("/healthz").status_code
            database_path.heal()
            database_recovery = recovers(http, account)

            redis_path.blackhole()
            redis_sends = [send(http, account) for _ in range(4)]
            redis_ready = readiness(http)
            redis_path.heal()
            redis_recovery = recovers(http, account)
            server.stop()
        stderr = server.stderr()

    assert [status for status, _ in database_sends] == [503, 503, 503], database_sends
    assert max(took for _, took in database_sends) < BOUND_S, database_sends
    assert database_ready[0] == 503 and database_ready[1]["database"] != "ok", database_ready
    assert database_ready[2] < BOUND_S and alive == 200
    assert [status for status, _ in redis_sends] == [503] * 4, redis_sends
    assert redis_sends[0][1] < BOUND_S, redis_sends
    assert max(took for _, took in redis_sends[1:]) < FAIL_FAST_S, redis_sends  # the breaker is open
    assert redis_ready[0] == 503 and redis_ready[1]["redis"] != "ok", redis_ready
    assert redis_ready[2] < BOUND_S
    assert TRACEBACK not in stderr, stderr
    summary(
        "faults[black-holed PostgreSQL, then Redis]: sends answered 503 in "
        f"{', '.join(f'{took:.1f}' for _, took in database_sends)} s / "
        f"{', '.join(f'{took:.2f}' for _, took in redis_sends)} s; "
        f"recovered {database_recovery:.1f} s / {redis_recovery:.1f} s after the path healed, no restart"
    )
