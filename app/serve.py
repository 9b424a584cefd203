"""Running the app under uvicorn, announcing the URL and what to do next."""

from __future__ import annotations

import contextlib
import errno
import gc
import logging
import os
import shlex
import shutil
import signal
import socket
import sys
import sysconfig
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

import uvicorn
from uvicorn.server import HANDLED_SIGNALS

from app.assembly import create_app
from app.logs import configure_logging, log_config
from core.runtime.core import Core
from core.settings import Settings
from core.startup import StartupError, check_deployment
from oauth.metadata import IssuerError

# The cyclic collector's thresholds while serving (CPython's defaults: 700, 10, 10). A server keeps
# many objects alive for minutes — an open stream or a waiting poll holds a couple of hundred — and
# with the defaults the collector's full passes walk all of them every few hundred requests,
# stalling every request in flight (250-350 ms with 1000 streams open). Collecting the young
# generation every 20,000 allocations instead makes those passes rare; the garbage it then holds
# at most is a few MB.
GC_THRESHOLDS = (20_000, 10, 10)
INTERRUPTED = 130  # the exit status after Ctrl-C, as a shell reports a command SIGINT stopped
PORTS_TRIED = 10  # a port in use: the next ones are tried for a free one to suggest


def tune_collector() -> None:
    """Once serving: everything built at start-up lives as long as the process, so it leaves the
    collector's passes (which otherwise stall every request for longer as streams and waiting polls
    pile up), and the young generation is collected every ``GC_THRESHOLDS[0]`` allocations. The
    benchmarks' bare servers call it too, so that both sides are served the same way."""
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


log = logging.getLogger("relaybox")


def serve(settings: Settings) -> int:
    """Serve until SIGTERM (exit status 0) or Ctrl-C (130). What stops it from starting (a port in
    use, an address it cannot listen on, an unusable public URL, a setting that cannot work:
    ``core.startup``) is one line on stderr, status 1; with ``log_format`` json every line, that one
    too, is a JSON object on stdout."""
    configure_logging(settings.log_format, settings.log_level)
    as_json = settings.log_format == "json"
    try:
        sock = listen(settings.host, settings.port)
    except (OSError, OverflowError) as error:
        return failed(cannot_listen(settings.host, settings.port, error), as_json=as_json)
    port = sock.getsockname()[1]
    if settings.port == 0:
        settings = settings.model_copy(update={"port": port})
    try:
        check_deployment(settings)
        app = create_app(settings)
    except (IssuerError, StartupError) as error:
        sock.close()
        if isinstance(error, StartupError) or settings.public_url:
            return failed(str(error), as_json=as_json)
        return failed(
            f"listening on {settings.host} needs RELAYBOX_PUBLIC_URL, the https URL clients reach it at "
            "(e.g. https://relay.example; it is the OAuth issuer): set it, or leave --host at 127.0.0.1 "
            "to serve this machine only",
            as_json=as_json,
        )
    except Exception:
        sock.close()
        if not as_json:
            raise
        log.exception("relaybox could not start")  # one JSON line, the traceback in its exc_info
        return 1
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
    server = AnnouncingServer(config, settings.base_url, on_shutdown=core.waits.begin_shutdown)
    server.announce_as_json = settings.log_format == "json"
    server.run(sockets=[sock])
    sys.stdout.flush()
    if server.interrupted:
        if server.announce_as_json:
            log.info("relaybox stopped (Ctrl-C)")
        else:
            print("relaybox stopped (Ctrl-C)", file=sys.stderr, flush=True)
        return INTERRUPTED
    return 0


def failed(message: str, *, as_json: bool = False) -> int:
    if as_json:
        log.error(message)
    else:
        print(f"error: {message}", file=sys.stderr, flush=True)
    return 1


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port`` (0: any free port), for uvicorn to listen on."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except BaseException:
        sock.close()
        raise
    return sock


def cannot_listen(host: str, port: int, error: OSError | OverflowError) -> str:
    """Why ``host``:``port`` cannot be listened on, and what to do instead, in one line."""
    if isinstance(error, OSError) and error.errno == errno.EADDRINUSE:
        free = next((other for other in range(port + 1, port + 1 + PORTS_TRIED) if _free(host, other)), 0)
        instead = f"--port {free}" if free else "--port 0 (any free port)"
        return f"port {port} is in use (another relaybox serve?): stop it, or pass {instead}"
    reason = (error.strerror if isinstance(error, OSError) else None) or str(error)
    reason = reason.removeprefix("bind(): ").rstrip(".")  # OverflowError: "bind(): port must be 0-65535."
    return f"cannot listen on {host} port {port}: {reason}: pass another --host or --port"


def _free(host: str, port: int) -> bool:
    if port > 65535:
        return False
    try:
        listen(host, port).close()
    except OSError:
        return False
    return True


def relaybox_command() -> str:
    """How to run this installation's ``relaybox`` from the shell that started the server (see
    ``command_for``); plain ``relaybox`` when its script is not where the interpreter keeps them."""
    script = Path(sysconfig.get_path("scripts")) / ("relaybox.exe" if os.name == "nt" else "relaybox")
    if not script.is_file():
        return "relaybox"
    return command_for(script, Path.cwd(), os.environ.get("PATH"), os.environ.get("PWD"))


def command_for(script: Path, cwd: Path, search_path: str | None, shell_dir: str | None) -> str:
    """``script``'s bare name when ``search_path`` (PATH) finds this very file; else its path, relative
    to ``cwd`` when that is shorter and the shell is there too (``shell_dir``, its ``$PWD``: dev.py
    runs the server in the repository, wherever it was started from); quoted for a shell."""
    found = shutil.which(script.name, path=search_path)
    if found is not None and Path(found).resolve() == script.resolve():
        return script.name
    shown = str(script)
    if shell_dir is None or Path(shell_dir).resolve() == cwd.resolve():
        relative = os.path.relpath(script, cwd)
        if os.sep not in relative:
            relative = os.path.join(os.curdir, relative)  # a bare name would be looked up on PATH
        shown = min(shown, relative, key=len)
    return shlex.quote(shown)


class AnnouncingServer(uvicorn.Server):
    """Prints the URL once the socket accepts connections, so a caller may connect at once.

    On SIGTERM or SIGINT, ``on_shutdown`` runs before uvicorn waits for open connections (which it
    does before the app's lifespan shutdown), so streams and long polls end cleanly instead of
    being cut after the grace period; the signal is not raised again afterwards, and
    ``interrupted`` tells a Ctrl-C (SIGINT) from a service manager's SIGTERM.
    """

    def __init__(
        self, config: uvicorn.Config, url: str, on_shutdown: Callable[[], None] | None = None
    ) -> None:
        super().__init__(config)
        self.url = url
        self.on_shutdown = on_shutdown
        self.announce_as_json = False
        self.interrupted = False

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.should_exit:
            return
        tune_collector()
        if self.announce_as_json:  # a log line like every other: no hints for a terminal
            log.info(f"relaybox is listening on {self.url}", extra={"url": self.url})
            return
        print(f"relaybox is listening on {self.url}", flush=True)
        relaybox = relaybox_command()
        print(
            f"  web app: {self.url}/app/   # open it on your phone (a phone needs https: docs/webapp.md)\n"
            "next: in another terminal run\n"
            f"  {relaybox} phone register --server {self.url}   # a virtual phone\n"
            f"  {relaybox} pair --server {self.url}   # pair this computer\n"
            f"  API reference: {self.url}/openapi.json",
            flush=True,
        )

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self.on_shutdown is not None:
            self.on_shutdown()
        await super().shutdown(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if sig == signal.SIGINT:
            self.interrupted = True
        super().handle_exit(sig, frame)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """uvicorn's, without raising the caught signal again once the server has stopped: a
        graceful stop returns (``serve`` then exits 0, or 130 after Ctrl-C), with no traceback."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        original = {sig: signal.signal(sig, self.handle_exit) for sig in HANDLED_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)
