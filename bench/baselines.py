"""The bare servers the benchmarks measure relaybox against, each served exactly the way ``relaybox
serve`` serves relaybox, so that the ratio compares the application and nothing else:

    .venv/bin/python bench/baselines.py starlette   # POST /bare: read the JSON body, answer JSON
    .venv/bin/python bench/baselines.py durable     # POST /bare, and a send's two queue rows committed
    .venv/bin/python bench/baselines.py mcp         # /mcp: an MCPServer with one list_devices tool

Served the same way means: one process, relaybox's own server class (``app.serve.AnnouncingServer``:
the URL line once it listens, the collector tuned by ``tune_collector``), uvicorn with its default
loop and HTTP implementation, and the same ``uvicorn.Config`` as ``app.serve.serve`` builds: relaybox's
logging configuration (``app.logs.log_config``: the redaction filter on every handler) at the level
and format of ``RELAYBOX_LOG_LEVEL``/``RELAYBOX_LOG_FORMAT``, the access log, proxy headers, the
same keep-alive and shutdown timeouts. The benchmark gives both servers the same logging settings
(``harness.logging_settings``), so the access log is on for both or off for both.

Run by ``send.py`` and ``mcp_calls.py`` as subprocesses; not a benchmark itself.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import sys
import time
import uuid
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from app.logs import log_config
from app.serve import AnnouncingServer, listen
from connector.outputs import DeviceInfo, DeviceListing  # the bare tool answers relaybox's shape
from core.settings import Settings

PHONE_NAME = "bench phone"  # the one device the bare tool lists, named as the bench's phone is
MAX_BODY = 4 * 1024 * 1024  # relaybox's /mcp transport cap
ENVELOPE_BYTES = 400  # about the sealed envelope of the bench's notification


def serve_like_relaybox(app: Any, sock: socket.socket) -> None:
    """Serve ``app`` on ``sock`` with the configuration ``app.serve.serve`` gives relaybox."""
    settings = Settings()  # RELAYBOX_LOG_* from the environment the benchmark set, as relaybox reads them
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    config = uvicorn.Config(
        app,
        log_level=settings.log_level,
        log_config=log_config(settings.log_format, settings.log_level),
        access_log=True,
        proxy_headers=True,
        forwarded_allow_ips=settings.forwarded_allow_ips,
        timeout_graceful_shutdown=3,
        timeout_keep_alive=30,
    )
    AnnouncingServer(config, url).run(sockets=[sock])


async def bare(request: Request) -> JSONResponse:
    body = await request.json()
    return JSONResponse({"id": f"msg_{uuid.uuid4().hex}", "fields": len(body)})


def starlette_app() -> Starlette:
    return Starlette(routes=[Route("/bare", bare, methods=["POST"])])


def durable_app() -> Starlette:
    """The bare route that also does the least a send must make durable before it answers: two queue
    rows (one per device, the size of a notification's envelope) inserted and committed, in a SQLite
    file in the working directory set up as relaybox's (WAL, ``synchronous=NORMAL``). Written on the
    event loop itself, in one statement, no hand-off to a thread: a floor, not a design."""
    database = sqlite3.connect(f"durable-{os.getpid()}.db", isolation_level=None, check_same_thread=False)
    database.execute("PRAGMA journal_mode=WAL")
    database.execute("PRAGMA synchronous=NORMAL")
    database.execute(
        "CREATE TABLE queue (seq INTEGER PRIMARY KEY AUTOINCREMENT, recipient TEXT NOT NULL,"
        " blob BLOB NOT NULL, created_at INTEGER NOT NULL)"
    )
    database.execute("CREATE INDEX queue_recipient_seq ON queue (recipient, seq)")

    async def durable(request: Request) -> JSONResponse:
        body = await request.json()
        now = int(time.time())
        database.execute("BEGIN IMMEDIATE")
        database.execute(
            "INSERT INTO queue (recipient, blob, created_at) VALUES ('phone', ?, ?), ('computer', ?, ?)",
            (os.urandom(ENVELOPE_BYTES), now, os.urandom(ENVELOPE_BYTES), now),
        )
        database.execute("COMMIT")
        return JSONResponse({"id": f"msg_{uuid.uuid4().hex}", "fields": len(body)})

    return Starlette(routes=[Route("/bare", durable, methods=["POST"])])


def mcp_app(url: str) -> Any:
    """An ``MCPServer`` with one ``list_devices`` tool returning a fixed listing of relaybox's shape,
    mounted as relaybox mounts its own (``streamable_http_app``, transport security), no auth."""
    from mcp.server import MCPServer
    from mcp.server.transport_security import TransportSecuritySettings
    from mcp.types import ToolAnnotations

    device = DeviceInfo(
        device_id="00000000-0000-4000-8000-000000000000",
        name=PHONE_NAME,
        surface_kind="phone",
        reachable=False,
    )
    listing = DeviceListing(devices=[device])
    server = MCPServer("bare", version="1.0.0")

    @server.tool(title="List devices", annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
    async def list_devices() -> DeviceListing:
        """List the user's paired devices."""
        return listing

    security = TransportSecuritySettings(
        allowed_hosts=[url.removeprefix("http://"), "127.0.0.1", "127.0.0.1:*"], allowed_origins=[url]
    )
    return server.streamable_http_app(
        streamable_http_path="/mcp", transport_security=security, max_request_body_size=MAX_BODY
    )


def main(argv: list[str]) -> int:
    apps = {"starlette": starlette_app, "durable": durable_app}
    if len(argv) != 1 or argv[0] not in (*apps, "mcp"):
        print("usage: baselines.py starlette|durable|mcp", file=sys.stderr)
        return 2
    sock = listen("127.0.0.1", 0)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    serve_like_relaybox(apps[argv[0]]() if argv[0] in apps else mcp_app(url), sock)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
