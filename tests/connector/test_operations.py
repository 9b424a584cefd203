"""Operations: /readyz, /metrics, request ids, JSON log lines, and waits that end at shutdown."""

from __future__ import annotations

import io
import json
import logging
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from app.assembly import create_app
from app.logs import JsonFormatter, RedactSecrets, log_config, route_template
from app.serve import AnnouncingServer, serve
from core.api import health
from core.api.request_ids import request_id
from core.bootstrap import build_core
from core.domain.secrets import new_sender_token
from core.runtime.core import Core
from core.settings import explicit_settings
from tests.helpers import create_token, register_phone
from tests.services import require_redis
from tests.sse import events

UNREACHABLE_DATABASE = "postgresql://relaybox:hunter2-secret@127.0.0.1:1/relaybox"  # nothing listens


def sample(text: str, name: str, **labels: str) -> float | None:
    """The value of one sample in Prometheus text format, ``None`` when absent."""
    wanted = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
    pattern = re.escape(name + (f"{{{wanted}}}" if labels else "")) + r" ([0-9.e+-]+)$"
    match = re.search(pattern, text, re.MULTILINE)
    return float(match[1]) if match else None


# -- /readyz -------------------------------------------------------------------------------------


def test_readyz_is_ready_when_the_database_answers(client: TestClient) -> None:
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"status": "ready", "checks": {"database": "ok"}}


@pytest.fixture
def core_without_database(tmp_path: Path) -> Iterator[Core]:
    settings = explicit_settings(
        data_dir=tmp_path / "data", database_url=UNREACHABLE_DATABASE, migrate_on_start=False
    )
    built = build_core(settings)
    yield built
    built.engine.dispose()


def test_readyz_is_503_naming_the_database_when_it_is_unreachable_and_says_nothing_more(
    core_without_database: Core, caplog: pytest.LogCaptureFixture
) -> None:
    with TestClient(create_app(core=core_without_database)) as client:
        response = client.get("/readyz")
        assert client.get("/healthz").status_code == 200  # alive, only not ready
    assert response.status_code == 503
    assert response.json() == {"status": "not_ready", "checks": {"database": "unreachable"}}
    readiness_logs = [r for r in caplog.records if r.name == "relaybox.health"]
    assert readiness_logs
    assert readiness_logs[0].__dict__["check"] == "database"
    for text in (response.text, *(r.getMessage() for r in readiness_logs)):
        assert "127.0.0.1" not in text and "hunter2" not in text and "postgresql" not in text


def test_a_probe_that_hangs_is_a_timeout_and_the_others_still_answer(
    client: TestClient, core: Core, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def hangs() -> None:
        await anyio.sleep_forever()

    # Long enough for PostgreSQL's probe on a loaded machine (0.2 s was not, once). The hanging
    # probe is cut off at the timeout; the margin above it is for a loaded CI machine (1 s was
    # exceeded by 0.29 s once), far below "forever".
    monkeypatch.setattr(health, "READY_TIMEOUT_S", 1.0)
    monkeypatch.setitem(core.readiness_probes, "redis", hangs)
    started = time.monotonic()
    response = client.get("/readyz")
    assert time.monotonic() - started < 1.0 + 4
    assert response.status_code == 503
    assert response.json() == {"status": "not_ready", "checks": {"database": "ok", "redis": "timeout"}}


def redis_core(tmp_path: Path, redis_url: str) -> Core:
    settings = explicit_settings(
        data_dir=tmp_path / "data", database_url=f"sqlite:///{tmp_path / 'r.db'}", redis_url=redis_url
    )
    return build_core(settings)


@pytest.mark.redis
def test_readyz_pings_the_configured_redis(tmp_path: Path) -> None:
    core = redis_core(tmp_path, require_redis())
    assert set(core.readiness_probes) == {"database", "redis"}
    with TestClient(create_app(core=core)) as http:
        response = http.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"status": "ready", "checks": {"database": "ok", "redis": "ok"}}


def test_readyz_is_503_naming_redis_when_it_is_unreachable(tmp_path: Path) -> None:
    pytest.importorskip("redis")
    core = redis_core(tmp_path, "redis://:hunter2-secret@127.0.0.1:1/0")  # nothing listens
    with TestClient(create_app(core=core)) as http:
        response = http.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {"status": "not_ready", "checks": {"database": "ok", "redis": "unreachable"}}
    assert "hunter2" not in response.text and "127.0.0.1" not in response.text


# -- /metrics ------------------------------------------------------------------------------------


def test_metrics_count_requests_by_route_template_never_by_path(client: TestClient) -> None:
    phone = register_phone(client)
    token = str(create_token(client, phone)["token"])
    assert client.post(f"/v1/send/{token}", json={"message": "hello"}).status_code == 200
    assert client.post(f"/v1/send/{token}", json={"message": "again"}).status_code == 200
    assert client.get(f"/nowhere/{token}").status_code == 404

    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert sample(text, "relaybox_requests_total", route="/v1/send/{token}", method="POST", status="200") == 2
    assert sample(text, "relaybox_requests_total", route="/v1/devices", method="POST", status="201") == 1
    assert sample(text, "relaybox_requests_total", route="unmatched", method="GET", status="404") == 1
    assert sample(text, "relaybox_request_seconds_count", route="/v1/send/{token}", method="POST") == 2
    assert token not in text
    assert token[len("rfk_live_") :] not in text
    assert "/nowhere" not in text


def test_metrics_read_pushes_streams_and_polls_from_the_core(client: TestClient, core: Core) -> None:
    core.push.outcomes["sent"] += 3
    core.presence.opened("dev_a")
    core.waits.long_polls += 2
    try:
        text = client.get("/metrics").text
    finally:
        core.presence.closed("dev_a")
        core.waits.long_polls -= 2
    assert sample(text, "relaybox_pushes_total", outcome="sent") == 3
    assert sample(text, "relaybox_pushes_total", outcome="no_route") == 0
    assert sample(text, "relaybox_open_streams") == 1
    assert sample(text, "relaybox_waiting_polls") == 2
    assert sample(text, "relaybox_group_rewrites_total") == 0


def test_metrics_count_the_group_transactions_written_again(client: TestClient, core: Core) -> None:
    core.group_rewrites.counted()
    assert sample(client.get("/metrics").text, "relaybox_group_rewrites_total") == 1


def test_each_app_has_its_own_registry(core: Core) -> None:
    first, second = TestClient(create_app(core=core)), TestClient(create_app(core=core))  # no lifespan
    first.get("/healthz")
    text = second.get("/metrics").text
    assert sample(text, "relaybox_requests_total", route="/healthz", method="GET", status="200") is None


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_open_streams_and_waiting_polls_show_while_they_wait_and_end_at_shutdown(
    live_server: str, core: Core
) -> None:
    """A stream and a long poll are counted while open; ``begin_shutdown`` ends both cleanly: the
    stream's response finishes and the poll answers its current state at once."""
    with httpx.Client(base_url=live_server, timeout=10) as http:
        phone = register_phone(http)
        headers = {"Authorization": f"Bearer {create_token(http, phone)['token']}"}
        created = http.post("/v1/interactions", json={"question": "ship it?"}, headers=headers).json()
        async with httpx.AsyncClient(base_url=live_server, timeout=30) as client:
            async with client.stream("GET", "/v1/sync", headers=phone.auth) as stream:
                frames = events(stream)
                with anyio.fail_after(5):
                    await anext(frames)  # the opening comment: subscribed
                async with anyio.create_task_group() as tasks:
                    polled: list[httpx.Response] = []

                    async def poll() -> None:
                        url = f"/v1/interactions/{created['id']}?wait=40"
                        polled.append(await client.get(url, headers=headers))

                    tasks.start_soon(poll)
                    for _ in range(250):  # up to 5 s for the poll to start waiting
                        if core.waits.long_polls == 1:
                            break
                        await anyio.sleep(0.02)
                    text = http.get("/metrics").text
                    assert sample(text, "relaybox_open_streams") == 1
                    assert sample(text, "relaybox_waiting_polls") == 1
                    started = time.monotonic()
                    await anyio.to_thread.run_sync(
                        core.waits.begin_shutdown
                    )  # as AnnouncingServer.shutdown does
                with anyio.fail_after(5):
                    async for _ in frames:  # the stream ends normally: no protocol error
                        pass
            elapsed = time.monotonic() - started
    assert polled[0].status_code == 200 and polled[0].json()["status"] == "pending"
    assert elapsed < 2
    assert core.waits.long_polls == 0 and core.presence.open_streams == 0


# -- request ids and JSON log lines ---------------------------------------------------------------


def test_every_response_has_a_request_id_and_a_safe_incoming_one_is_kept(client: TestClient) -> None:
    generated = client.get("/healthz").headers["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{32}", generated)
    assert (
        client.get("/healthz", headers={"X-Request-ID": "edge-42.a"}).headers["x-request-id"] == "edge-42.a"
    )
    token = new_sender_token()
    for unsafe in ("two words", "x" * 65, token, "<script>"):
        echoed = client.get("/healthz", headers={"X-Request-ID": unsafe}).headers["x-request-id"]
        assert echoed != unsafe and re.fullmatch(r"[0-9a-f]{32}", echoed)


def json_lines(logger_name: str) -> tuple[logging.Logger, io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactSecrets())
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger(logger_name)
    logger.handlers = [handler]
    logger.propagate = False
    logger.setLevel(logging.INFO)
    return logger, stream


def test_an_access_line_is_json_with_the_request_id_and_the_route_template_never_the_token() -> None:
    token = new_sender_token()
    logger, stream = json_lines("uvicorn.access")
    rid, route = request_id.set("req-1"), route_template.set("/v1/send/{token}")
    try:
        logger.info('%s - "%s %s HTTP/%s" %d', "10.0.0.1:5000", "POST", f"/v1/send/{token}?x=1", "1.1", 200)
    finally:
        request_id.reset(rid)
        route_template.reset(route)
        logger.handlers = []
    line = stream.getvalue()
    assert line.count("\n") == 1 and token not in line
    record = json.loads(line)
    assert record["message"] == '10.0.0.1:5000 - "POST /v1/send/{token} HTTP/1.1" 200'
    assert record["request_id"] == "req-1" and record["route"] == "/v1/send/{token}"
    assert (record["level"], record["logger"], record["method"], record["status"]) == (
        "info",
        "uvicorn.access",
        "POST",
        200,
    )
    assert record["time"].endswith("+00:00")


def test_an_unmatched_path_is_logged_redacted_without_its_query() -> None:
    token = new_sender_token()
    logger, stream = json_lines("uvicorn.access")
    try:
        logger.info(
            '%s - "%s %s HTTP/%s" %d', "10.0.0.1:5000", "GET", f"/v1/send/{token}/x?k={token}", "1.1", 404
        )
    finally:
        logger.handlers = []
    record = json.loads(stream.getvalue())
    assert record["path"] == "/v1/send/[redacted]/x" and "route" not in record and "request_id" not in record
    assert token not in stream.getvalue()


def test_app_records_keep_their_extra_fields_and_tracebacks_are_redacted() -> None:
    token = new_sender_token()
    logger, stream = json_lines("relaybox.test")
    try:
        try:
            raise ValueError(f"bad token {token}")
        except ValueError:
            logger.exception("push failed for %s", token, extra={"push_type": "ring", "outcome": 3})
    finally:
        logger.handlers = []
    record = json.loads(stream.getvalue())
    assert token not in stream.getvalue()
    assert record["message"] == "push failed for [redacted]"
    assert (record["level"], record["push_type"], record["outcome"]) == ("error", "ring", 3)
    assert "ValueError: bad token [redacted]" in record["exc_info"]


def test_json_log_config_writes_every_handler_as_redacted_json_on_stdout() -> None:
    config = log_config("json")
    assert config["handlers"] and config["root"]["handlers"] == ["default"]
    for handler in config["handlers"].values():
        assert handler["formatter"] == "json" and handler["filters"] == ["redact"]
        assert handler["stream"] == "ext://sys.stdout"
    assert log_config("text")["handlers"]["default"]["formatter"] == "default"


def test_serve_trusts_forwarded_headers_from_the_configured_proxies_and_hooks_shutdown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[AnnouncingServer] = []

    def run(server: AnnouncingServer, sockets: list[socket.socket] | None = None) -> None:
        seen.append(server)
        for sock in sockets or ():
            sock.close()

    monkeypatch.setattr(AnnouncingServer, "run", run)
    settings = explicit_settings(
        data_dir=tmp_path / "data",
        port=0,
        migrate_on_start=False,
        forwarded_allow_ips="10.0.0.0/8",
        log_format="json",
    )
    assert serve(settings) == 0
    [server] = seen
    app = server.config.app
    assert isinstance(app, Starlette)
    core: Core = app.state.core
    core.engine.dispose()
    assert server.config.proxy_headers is True
    assert server.config.forwarded_allow_ips == "10.0.0.0/8"
    assert server.config.log_config["handlers"]["access"]["formatter"] == "json"  # type: ignore[index]
    assert server.on_shutdown == core.waits.begin_shutdown
