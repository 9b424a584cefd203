"""What the benchmark scripts share on the server side: the server processes they start, watch
and stop, their error, and the end of a run (the clean-up and what it says about the servers).

The scripts run as ``.venv/bin/python bench/<script>.py``, so ``bench/`` is on ``sys.path`` and
they import this file as ``harness`` (the client side is ``loadgen``, the device set-up
``devices``). It is not a benchmark itself.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, TypeVar

RAISED_LIMIT = 1_000_000_000  # a rate limit raised for the run
SEND_CLASS_LIMITS = (  # what limits sending: per token, per receiver, per client address
    "LIMIT_TOKEN_BURST",
    "LIMIT_TOKEN_MONTHLY",
    "LIMIT_RECEIVER_DAILY",
    "LIMIT_IP_MINUTE",
    "LIMIT_IP_HOUR",
)
LISTENING = "relaybox is listening on "  # the first stdout line of ``relaybox serve``
BASELINE_LISTENING = "baseline is listening on "  # the same line of a script's own baseline server
STARTUP_TIMEOUT_S = 30.0
STOP_GRACE_S = 5.0

T = TypeVar("T")


class BenchError(RuntimeError):
    """The run could not complete (a server failed, a request timed out, a setup step was refused)."""


# -- server processes ---------------------------------------------------------------------------


@dataclass
class Server:
    """A server subprocess; its stdout and stderr are the files ``<log_dir>/<name>.stdout|stderr``."""

    name: str
    process: subprocess.Popen[bytes]
    log_dir: Path
    url: str = ""
    tail_lines: int = 15  # of stderr, shown when it failed

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def address(self) -> tuple[str, int]:
        host, _, port = self.url.removeprefix("http://").rpartition(":")
        return host, int(port)

    def cpu_s(self) -> float:
        """User + system CPU seconds the server process has used so far."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def status_field(self, name: str) -> int:
        """A numeric field of /proc/<pid>/status (VmRSS is in KiB)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(f"{name}:"):
                return int(line.split()[1])
        raise BenchError(f"no {name} in /proc/{self.pid}/status")

    def rss_kb(self) -> int:
        """VmRSS of the server process, in KiB."""
        return self.status_field("VmRSS")

    def threads(self) -> int:
        return self.status_field("Threads")

    def open_fds(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def fd_limit(self) -> str:
        for line in Path(f"/proc/{self.pid}/limits").read_text().splitlines():
            if line.startswith("Max open files"):
                return line.split()[3]
        return "?"

    def alive(self) -> bool:
        return self.process.poll() is None

    def log(self, stream: str) -> str:
        path = self.log_dir / f"{self.name}.{stream}"
        return path.read_text(errors="replace") if path.exists() else ""

    def stderr_tail(self) -> str:
        return "\n".join(self.log("stderr").splitlines()[-self.tail_lines :])

    def count_in_log(self, pattern: str, stream: str) -> int:
        """Lines of stdout (the access log) or stderr matching a regular expression."""
        return len(re.findall(pattern, self.log(stream), flags=re.MULTILINE))

    def stop(self) -> None:
        if self.alive():
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def relaybox_command(data_dir: str | Path) -> list[str]:
    """``relaybox serve`` on a free port with this Python (a relative ``data_dir`` is in the work dir)."""
    return [sys.executable, "-m", "app.cli", "serve", "--port", "0", "--data-dir", str(data_dir)]


def raised_limits(*names: str) -> dict[str, str]:
    """``RELAYBOX_<name>`` settings that raise these limits out of the run's way."""
    return {f"RELAYBOX_{name}": str(RAISED_LIMIT) for name in names}


def server_env(data_dir: Path, settings: Mapping[str, str]) -> dict[str, str]:
    """The inherited environment minus any RELAYBOX_* setting, plus the run's ``settings``."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("RELAYBOX_")}
    env.update(settings)
    env["RELAYBOX_DATA_DIR"] = str(data_dir)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def raise_fd_limit(needed: int, what: str) -> int:
    """Raise this process's soft open-file limit to the hard limit; the server inherits it too.
    Warns when that is under ``needed`` (the files the run will open for ``what``)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    if target < needed:
        print(f"warning: open-file limit {target} may be too low for {what}", flush=True)
    return target


def start_server(
    name: str,
    command: list[str],
    work_dir: Path,
    timeout_s: float,
    settings: Mapping[str, str] | None = None,
    *,
    fd_limit: int | None = None,
    probe: bool = True,
    tail_lines: int = 15,
) -> Server:
    """Start a server whose first stdout line announces its URL and wait for that line; with
    ``probe``, also until it accepts connections (a baseline announces before it listens; relaybox
    only once it does). ``settings`` are ``RELAYBOX_*`` settings for it (the data dir is
    ``<work_dir>/data``); ``fd_limit`` is its soft open-file limit. stdout and stderr go to files:
    uvicorn writes its access log to stdout, and a file, unlike an undrained pipe, never blocks the
    server."""
    log_dir = work_dir / "logs"
    log_dir.mkdir(exist_ok=True)

    def limit_fds() -> None:
        assert fd_limit is not None
        resource.setrlimit(resource.RLIMIT_NOFILE, (fd_limit, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    with (log_dir / f"{name}.stdout").open("wb") as out, (log_dir / f"{name}.stderr").open("wb") as err:
        process = subprocess.Popen(
            command,
            cwd=work_dir,  # no stray .env is picked up
            env=server_env(work_dir / "data", settings or {}),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            preexec_fn=None if fd_limit is None else limit_fds,  # no threads exist yet in this process
        )
    server = Server(name, process, log_dir, tail_lines=tail_lines)
    try:
        wait_until_ready(server, timeout_s, probe)
    except BaseException:  # the caller only stops what it got back: SIGTERM's SystemExit included
        server.stop()
        raise
    return server


def start_relaybox(work_dir: Path, timeout_s: float, settings: Mapping[str, str], fd_limit: int) -> Server:
    """The one ``relaybox serve`` of a run that measures a single server (``stream.py``,
    ``longpoll.py``): named "server", announced once it listens, a longer stderr tail."""
    command = relaybox_command(work_dir / "data")
    return start_server(
        "server", command, work_dir, timeout_s, settings, fd_limit=fd_limit, probe=False, tail_lines=20
    )


def wait_until_ready(server: Server, timeout_s: float, probe: bool) -> None:
    """Until the server has announced its URL (and, with ``probe``, accepts connections)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not server.alive():
            raise BenchError(
                f"{server.name} exited with {server.process.returncode}:\n{server.stderr_tail()}"
            )
        first, newline, _ = server.log("stdout").partition("\n")
        if newline and first.startswith((LISTENING, BASELINE_LISTENING)):
            server.url = first.split(" on ", 1)[1].strip()
        if server.url and (not probe or accepts_connections(server.address)):
            return
        time.sleep(0.05)
    if probe:
        raise BenchError(f"{server.name} was not accepting connections after {timeout_s:.0f} s")
    raise BenchError(f"{server.name} did not announce its URL within {timeout_s:.0f} s")


def accepts_connections(address: tuple[str, int]) -> bool:
    """The URL line of a baseline comes out before uvicorn listens on the socket, so probe it."""
    try:
        socket.create_connection(address, timeout=1).close()
    except OSError:
        return False
    return True


def free_socket() -> socket.socket:
    """A socket bound to a free port on 127.0.0.1, for a baseline server to serve on."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


# -- the end of a run ---------------------------------------------------------------------------


def health(server: Server, was_alive: bool) -> None:
    """Say how a server fared: alive to the end, and any traceback in its log."""
    state = "ran to the end" if was_alive else f"DIED (exit {server.process.returncode})"
    tracebacks = server.log("stderr").count("Traceback")
    print(f"{server.name}: {state}; tracebacks in its log: {tracebacks}")
    if tracebacks or not was_alive:
        print(server.stderr_tail())


def server_health(server: Server, was_alive: bool) -> None:
    """Say how the one server fared: alive to the end, failed answers, tracebacks."""
    state = "ran to the end" if was_alive else f"DIED before the end (exit {server.process.returncode})"
    failed = server.count_in_log(r'HTTP/1\.1" [45]\d\d ', "stdout")
    tracebacks = server.count_in_log(r"^Traceback", "stderr")
    print(f"server: {state}; 4xx/5xx responses: {failed}; tracebacks in its stderr: {tracebacks}")
    if tracebacks or not was_alive:
        print("--- server stderr (tail) ---")
        print(server.stderr_tail())


def stop_servers(servers: list[Server], say: Callable[[Server, bool], None] = health) -> None:
    """Stop every server (SIGTERM, then SIGKILL), then ``say`` how each fared."""
    alive = [server.alive() for server in servers]
    for server in servers:
        server.stop()
    for server, was_alive in zip(servers, alive, strict=True):
        say(server, was_alive)


def remove_work_dir(work_dir: Path, keep: bool, note: str = "") -> None:
    if keep:
        print(f"kept {work_dir}{note}")
    else:
        shutil.rmtree(work_dir, ignore_errors=True)


def stop_on_sigterm(what: str) -> None:
    """On SIGTERM, say so and exit 2 through the ``finally`` that stops ``what``."""

    def on_sigterm(_signum: int, _frame: object) -> NoReturn:
        print(f"FAILED: interrupted by SIGTERM; stopping {what}", flush=True)
        raise SystemExit(2)  # unwinds through the finally that stops the servers

    signal.signal(signal.SIGTERM, on_sigterm)


def describe(exc: BaseException) -> str:
    """The first leaf of an exception group, or the exception itself."""
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


def serve_like_relaybox(app: Any, sock: socket.socket, **options: Any) -> None:
    """Serve a benchmark's bare app on ``sock`` the way ``relaybox serve`` serves relaybox: uvicorn's
    default loop and HTTP implementation, the access log on, proxy headers, and the collector tuned
    once serving (``app.serve.tune_collector``)."""
    import uvicorn

    from app.serve import tune_collector

    class ServedLikeRelaybox(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            tune_collector()

    config = uvicorn.Config(
        app, log_level="info", access_log=True, proxy_headers=True, timeout_graceful_shutdown=3, **options
    )
    ServedLikeRelaybox(config).run(sockets=[sock])
