"""Running the app under uvicorn, announcing the URL and what to do next."""

from __future__ import annotations

import socket
import sys

import uvicorn

from connector.app import create_app
from connector.logs import log_config
from core.settings import Settings


def serve(settings: Settings) -> int:
    sock = socket.socket(socket.AF_INET6 if ":" in settings.host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((settings.host, settings.port))
    port = sock.getsockname()[1]
    if settings.port == 0:
        settings = settings.model_copy(update={"port": port})
    app = create_app(settings)
    url = settings.base_url
    print(f"relaybox is listening on {url}", flush=True)
    print(
        "next: in another terminal run\n"
        f"  relaybox phone register --server {url}     # a virtual phone\n"
        f"  relaybox pair --server {url}               # pair this computer; type the code into the phone\n"
        f"  API reference: {url}/openapi.json",
        flush=True,
    )
    config = uvicorn.Config(
        app,
        log_level="info",
        log_config=log_config(),
        access_log=True,
        proxy_headers=True,
        timeout_graceful_shutdown=3,
    )
    server = uvicorn.Server(config)
    server.run(sockets=[sock])
    sys.stdout.flush()
    return 0
