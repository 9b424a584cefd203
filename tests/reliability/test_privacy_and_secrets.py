"""Privacy and secrets, proven on a real server run (SQLite with text logs; PostgreSQL and Redis
with JSON logs; both at the debug level): marked content goes through every route and tool that
carries content and reaches the devices, yet no marker is in the database files, a ``pg_dump``,
Redis or any log line; and no credential the run used (sender token, device credentials, OAuth code
and tokens, the server key) is in any log line. Canaries the server does store or log prove each
source is really read."""

from __future__ import annotations

import base64
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from app.assembly import create_app
from connector.tools import TOOL_SCOPES
from core.bootstrap import build_core
from core.settings import explicit_settings
from tests.e2e.conftest import TRACEBACK, Cli, RelayboxServer
from tests.helpers import register_phone
from tests.reliability.content_run import (
    REST_DOORS,
    SERVER_ENV,
    TOOL_DOORS,
    WITHOUT_CONTENT,
    ContentRun,
    run_everything,
)
from tests.reliability.instances import PrivateRedis
from tests.reliability.scan import (
    Sources,
    markers_found,
    object_store_files,
    postgres_dump,
    redis_contents,
    sqlite_files,
)
from tests.services import fresh_postgres_database

pytestmark = pytest.mark.e2e


@dataclass
class Finished:
    """A stopped server's leftovers: what it stored, what it logged, and the canaries planted."""

    backend: str
    run: ContentRun
    stored: Sources
    logs: Sources
    stored_canary: str  # a device name: the server keeps it in plaintext by design
    logged_canary: str  # a requested unknown path and request id: the access log shows them


def _serve_and_run(backend: str, workdir: Path, env: dict[str, str]) -> Finished:
    """Serve, run everything, plant the canaries, stop; ``stored`` holds the SQLite files as they
    were while the server ran (recent writes sit in the WAL) and after it stopped."""
    server_key = base64.b64encode(secrets.token_bytes(32)).decode()
    data = workdir / "server" / "data"
    env = SERVER_ENV | env | {"RELAYBOX_SERVER_SECRET_KEY": server_key}
    with RelayboxServer(workdir / "server", env=env) as server:
        url = server.wait_until_ready()
        cli = Cli(url, workdir / "cli")
        try:
            run = run_everything(url, cli, workdir)
        finally:
            cli.close()
        run.credentials["server secret key"] = server_key
        stored_canary, logged_canary = "canary" + secrets.token_hex(6), "canary" + secrets.token_hex(6)
        with httpx.Client(base_url=url, trust_env=False, timeout=10) as http:
            register_phone(http, name=stored_canary)
            # Text logs show an unknown path; JSON logs the route template instead, and the request id.
            unknown = http.get(f"/nowhere/{logged_canary}", headers={"X-Request-ID": logged_canary})
            assert unknown.status_code == 404
        stored = {
            f"{name} (running)": content for name, content in object_store_files(data / "objects").items()
        }
        if backend == "sqlite":
            stored |= {f"{name} (running)": content for name, content in sqlite_files(data).items()}
        server.stop()
    assert TRACEBACK not in server.stderr(), server.stderr()
    stored |= object_store_files(data / "objects")
    if backend == "sqlite":
        stored |= sqlite_files(data)
    logs = {"server stdout": server.stdout().encode(), "server stderr": server.stderr().encode()}
    return Finished(backend, run, stored, logs, stored_canary, logged_canary)


@pytest.fixture(scope="module", params=["sqlite", "postgres+redis"])
def finished(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Finished]:
    backend: str = request.param
    workdir = tmp_path_factory.mktemp(backend.replace("+", "_"))
    if backend == "sqlite":
        yield _serve_and_run(backend, workdir, {"RELAYBOX_LOG_FORMAT": "text", "RELAYBOX_LOG_LEVEL": "debug"})
        return
    with fresh_postgres_database() as database_url, PrivateRedis() as redis_server:
        env = {
            "RELAYBOX_LOG_FORMAT": "json",
            "RELAYBOX_LOG_LEVEL": "debug",
            "RELAYBOX_DATABASE_URL": database_url,
            "RELAYBOX_REDIS_URL": redis_server.url,
            # serve on PostgreSQL refuses a store of its own: the folder it would use anyway
            "RELAYBOX_FILE_STORE_DIR": str(workdir / "server" / "data" / "objects"),
        }
        done = _serve_and_run(backend, workdir, env)
        done.stored |= postgres_dump(database_url) | redis_contents(redis_server.client())
        # Redis keeps no content, so no canary of the server's own: plant one, see the scan find it.
        redis_canary = "canary" + secrets.token_hex(6)
        redis_server.client().set(f"relaybox:canary:{redis_canary}", redis_canary)
        assert markers_found(redis_contents(redis_server.client()), [redis_canary]) == [
            (redis_canary, "redis")
        ]
        yield done


def test_no_content_marker_is_kept_in_plaintext_anywhere(
    finished: Finished, summary: Callable[[str], None]
) -> None:
    markers = finished.run.markers
    found = markers_found(finished.stored | finished.logs, markers.all)
    leaks = [f"{markers.all[marker]} in {source}" for marker, source in found]
    assert not leaks, leaks
    summary(
        f"privacy[{finished.backend}]: {len(markers.all)} markers ({len(markers.delivered)} delivered), "
        f"0 found in {', '.join(sorted(finished.stored | finished.logs))}"
    )


def test_no_credential_appears_in_any_log_line(finished: Finished, summary: Callable[[str], None]) -> None:
    credentials = finished.run.credentials
    assert all(credentials.values()), credentials
    found = markers_found(finished.logs, credentials.values())
    by_value = {value: kind for kind, value in credentials.items()}
    leaks = [f"{by_value[value]} in {source}" for value, source in found]
    assert not leaks, leaks
    lines = sum(content.count(b"\n") for content in finished.logs.values())
    summary(f"secrets[{finished.backend}]: {len(credentials)} credentials, 0 in {lines} log lines")


def test_the_scan_reads_what_the_server_stores_and_logs(finished: Finished) -> None:
    """The scan can fail: canaries that the server keeps (a device name) and logs (a path, a request id)
    are found, in the stored bytes and in the log respectively."""
    assert markers_found(finished.stored, [finished.stored_canary]), "the stored canary was not found"
    assert markers_found(finished.logs, [finished.logged_canary]), "the logged canary was not found"


def test_every_operation_and_tool_is_a_door_or_carries_no_content(tmp_path: Path) -> None:
    """A route or tool added later (file transfer, say) fails here until the privacy run sends
    markers through it (``REST_DOORS``, ``TOOL_DOORS``) or it is listed as taking no content."""
    core = build_core(explicit_settings(data_dir=tmp_path))
    with TestClient(create_app(core=core)) as client:
        document = client.get("/openapi.json").json()
    core.engine.dispose()
    every = {
        (f"{method.upper()} {path}", "requestBody" in operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
    }
    taking_input = {name for name, has_body in every if has_body or not name.startswith(("GET", "DELETE"))}
    covered = {route for _door, routes in REST_DOORS for route in routes}
    assert taking_input - covered - set(WITHOUT_CONTENT) == set()
    assert covered | set(WITHOUT_CONTENT) <= {name for name, _ in every}  # no stale names
    assert {tool for _door, tools in TOOL_DOORS for tool in tools} == set(TOOL_SCOPES)
