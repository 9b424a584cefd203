"""A dependency that does not answer is a 503 ``unavailable`` with Retry-After for every door, one
warning in the log, never a 500 with a traceback"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.exc import OperationalError
from starlette.testclient import TestClient

from app.assembly import create_app
from core.adapters.limits.base import LimitCheck
from core.adapters.limits.redis import RedisRateLimiter
from core.availability import DependencyUnavailableError, failure_kind, unavailable_service
from core.bootstrap import build_core
from core.settings import explicit_settings
from tests.helpers import error_code


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def app_on_a_dead_database(tmp_path: Path) -> Iterator[TestClient]:
    settings = explicit_settings(
        data_dir=tmp_path,
        database_url=f"postgresql://postgres@127.0.0.1:{closed_port()}/nothing?connect_timeout=2",
        migrate_on_start=False,
    )
    with TestClient(create_app(core=build_core(settings)), raise_server_exceptions=False) as client:
        yield client


def test_a_database_that_refuses_connections_answers_503_unavailable(
    app_on_a_dead_database: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    token = "rfk_live_" + "a" * 32
    with caplog.at_level(logging.WARNING):
        sent = app_on_a_dead_database.post(
            "/v1/send", json={"message": "hi"}, headers={"Authorization": f"Bearer {token}"}
        )
        shim = app_on_a_dead_database.post("/v1/messages.json", data={"token": token, "message": "hi"})
        registered = app_on_a_dead_database.post(
            "/oauth/register", json={"redirect_uris": ["http://127.0.0.1/cb"]}
        )
        ready = app_on_a_dead_database.get("/readyz")
        mcp = app_on_a_dead_database.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={
                "Authorization": "Bearer rba_" + "a" * 43,
                "Accept": "application/json, text/event-stream",
            },
        )
    assert sent.status_code == 503 and error_code(sent) == "unavailable", sent.text
    assert sent.headers["retry-after"] == "2"
    assert shim.status_code == 503 and shim.json()["status"] == 0, shim.text
    assert registered.status_code == 503 and registered.json()["error"] == "temporarily_unavailable"
    assert mcp.status_code == 503 and error_code(mcp) == "unavailable", mcp.text  # the token check
    assert ready.status_code == 503 and ready.json()["checks"]["database"] != "ok"
    assert "Traceback" not in caplog.text and "internal_error" not in caplog.text
    outage = [r.getMessage() for r in caplog.records if r.getMessage().startswith("database unavailable")]
    # The driver's class is named, so an operator can tell a refused connection from a full server
    # or a deadline; its text (which quotes the address) is not logged.
    assert outage and all("(psycopg.OperationalError" in line for line in outage), outage
    assert not any("127.0.0.1" in line or "refused" in line for line in outage), outage


def test_a_database_outage_is_logged_with_the_drivers_class_and_sqlstate_not_its_text() -> None:
    class TooManyClientsError(Exception):
        sqlstate = "53300"

    cause = TooManyClientsError("sorry, s3cret")
    error = OperationalError("INSERT INTO secret_table", {"token": "s3cret"}, cause)
    # The driver's top package (psycopg in production) and class, and the SQLSTATE.
    assert failure_kind(error) == "OperationalError (tests.TooManyClientsError, 53300)"
    assert failure_kind(TimeoutError("s3cret")) == "TimeoutError"


def test_the_redis_rate_limiter_reports_redis_unavailable_when_it_is_down() -> None:
    limiter = RedisRateLimiter(f"redis://127.0.0.1:{closed_port()}/0")
    try:
        with pytest.raises(DependencyUnavailableError) as raised:
            limiter.acquire([LimitCheck("token_burst", "tok", 60)], now=1000.0)
    finally:
        limiter.close()
    assert unavailable_service(raised.value) == "redis"


def test_a_send_while_the_rate_limits_redis_is_down_answers_503_unavailable(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = explicit_settings(
        data_dir=tmp_path, redis_url=f"redis://127.0.0.1:{closed_port()}/0?socket_connect_timeout=1"
    )
    core = build_core(settings)
    with TestClient(create_app(core=core)) as client:  # an error the app raises would fail the test
        with caplog.at_level(logging.WARNING):
            sent = client.post(
                "/v1/send", json={"message": "hi"}, headers={"Authorization": "Bearer rfk_live_" + "a" * 32}
            )
    core.engine.dispose()
    assert sent.status_code == 503 and error_code(sent) == "unavailable", sent.text
    assert "Traceback" not in caplog.text
    assert any("redis unavailable" in record.getMessage() for record in caplog.records)


def test_other_failures_are_not_mistaken_for_an_outage() -> None:
    assert unavailable_service(ValueError("bug")) is None
    assert unavailable_service(KeyError("bug")) is None
