"""Running the app under uvicorn, announcing the URL and what to do next."""

from __future__ import annotations

import contextlib
import gc
import logging
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator

import uvicorn
from uvicorn.server import HANDLED_SIGNALS

from connector.app import create_app
from connector.logs import log_config
from core.context import Core
from core.settings import Settings

# The cyclic collector's thresholds while serving (CPython's defaults: 700, 10, 10). A server keeps
# many objects alive for minutes — an open stream or a waiting poll holds a couple of hundred — and
# with the defaults the collector's full passes walk all of them every few hundred requests,
# stalling every request in flight (250-350 ms with 1000 streams open). Collecting the young
# generation every 20,000 allocations instead makes those passes rare; the garbage it then holds
# at most is a few MB.
GC_THRESHOLDS = (20_000, 10, 10)


def tune_collector() -> None:
    """Once serving: everything built at start-up lives as long as the process, so it leaves the
    collector's passes (which otherwise stall every request for longer as streams and waiting polls
    pile up), and the young generation is collected every ``GC_THRESHOLDS[0]`` allocations. The
    benchmarks' bare servers call it too, so that both sides are served the same way."""
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


log = logging.getLogger("relaybox")


def serve(settings: Settings) -> int:
    sock = socket.socket(socket.AF_INET6 if ":" in settings.host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((settings.host, settings.port))
    port = sock.getsockname()[1]
    if settings.port == 0:
        settings = settings.model_copy(update={"port": port})
    app = create_app(settings)
    core: Core = app.state.core
    config = uvicorn.Config(
        app,
        log_level=settings.log_level,
        log_config=log_config(settings.log_format, settings.log_level),
        access_log=True,
        proxy_headers=True,  # X-Forwarded-Proto/-For, from the proxies listed in forwarded_allow_ips only
        forwarded_allow_ips=settings.forwarded_allow_ips,
        timeout_graceful_shutdown=3,
        timeout_keep_alive=30,  # longer than common clients' idle pools: no reset on a reused connection
    )
    server = AnnouncingServer(config, settings.base_url, on_shutdown=core.begin_shutdown)
    server.announce_as_json = settings.log_format == "json"
    server.run(sockets=[sock])
    sys.stdout.flush()
    return 0


class AnnouncingServer(uvicorn.Server):
    """Prints the URL once the socket accepts connections, so a caller may connect at once.

    On SIGTERM or SIGINT, ``on_shutdown`` runs before uvicorn waits for open connections (which it
    does before the app's lifespan shutdown), so streams and long polls end cleanly instead of
    being cut after the grace period; the process then exits 0 rather than re-raising the signal.
    """

    def __init__(
        self, config: uvicorn.Config, url: str, on_shutdown: Callable[[], None] | None = None
    ) -> None:
        super().__init__(config)
        self.url = url
        self.on_shutdown = on_shutdown
        self.announce_as_json = False

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.should_exit:
            return
        tune_collector()
        if self.announce_as_json:  # a log line like every other: no hints for a terminal
            log.info(f"relaybox is listening on {self.url}", extra={"url": self.url})
            return
        print(f"relaybox is listening on {self.url}", flush=True)
        print(
            "next: in another terminal run\n"
            f"  relaybox phone register --server {self.url}   # a virtual phone\n"
            f"  relaybox pair --server {self.url}   # pair this computer\n"
            f"  API reference: {self.url}/openapi.json",
            flush=True,
        )

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self.on_shutdown is not None:
            self.on_shutdown()
        await super().shutdown(sockets)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """uvicorn's, without raising the caught signal again once the server has stopped: a
        graceful stop is a normal exit (status 0), and Ctrl-C prints no traceback."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        original = {sig: signal.signal(sig, self.handle_exit) for sig in HANDLED_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)
