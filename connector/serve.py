"""Running the app under uvicorn, announcing the URL and what to do next."""

from __future__ import annotations

import gc
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
    config = uvicorn.Config(
        app,
        log_level="info",
        log_config=log_config(),
        access_log=True,
        proxy_headers=True,
        timeout_graceful_shutdown=3,
        timeout_keep_alive=30,  # longer than common clients' idle pools: no reset on a reused connection
    )
    server = AnnouncingServer(config, settings.base_url)
    server.run(sockets=[sock])
    sys.stdout.flush()
    return 0


class AnnouncingServer(uvicorn.Server):
    """Prints the URL once the socket accepts connections, so a caller may connect at once."""

    def __init__(self, config: uvicorn.Config, url: str) -> None:
        super().__init__(config)
        self.url = url

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.should_exit:
            return
        # Everything built at start-up lives as long as the process: keep it out of the collector's
        # full passes, which otherwise stall every request for longer as waiting polls pile up.
        gc.freeze()
        print(f"relaybox is listening on {self.url}", flush=True)
        print(
            "next: in another terminal run\n"
            f"  relaybox phone register --server {self.url}   # a virtual phone\n"
            f"  relaybox pair --server {self.url}   # pair this computer\n"
            f"  API reference: {self.url}/openapi.json",
            flush=True,
        )
