"""The bare servers the benchmarks measure relaybox against, each served exactly the way ``relaybox
serve`` serves relaybox, so that the ratio compares the application and nothing else:

    .venv/bin/python bench/baselines.py starlette   # POST /bare: read the JSON body, answer JSON
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

import socket
import sys
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
    if argv not in (["starlette"], ["mcp"]):
        print("usage: baselines.py starlette|mcp", file=sys.stderr)
        return 2
    sock = listen("127.0.0.1", 0)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    serve_like_relaybox(starlette_app() if argv == ["starlette"] else mcp_app(url), sock)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
