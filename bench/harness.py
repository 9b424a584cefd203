"""The server processes the benchmark scripts start, watch and stop, and their error.

The scripts run as ``.venv/bin/python bench/<script>.py``, so ``bench/`` is on ``sys.path`` and
they import this file as ``harness`` (the client is ``http1``, the load rounds ``loadgen``, the CPU
figures ``meter``, the run's frame ``lifecycle``). It is not a benchmark itself.
"""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from meter import process_cpu_s

RAISED_LIMIT = 1_000_000_000  # a rate limit raised for the run
SEND_CLASS_LIMITS = (  # what limits sending: per token, per receiver, per client address
    "LIMIT_TOKEN_BURST",
    "LIMIT_TOKEN_MONTHLY",
    "LIMIT_RECEIVER_DAILY",
    "LIMIT_IP_MINUTE",
    "LIMIT_IP_HOUR",
)
SETUP_LIMITS = (  # every device is on 127.0.0.1, and the server takes any number of phones
    "REGISTER_PER_IP_PER_MINUTE",
    "PAIR_INIT_PER_IP_PER_MINUTE",
    "OPEN_REGISTRATIONS_PER_HOUR",
)
LISTENING = "relaybox is listening on "  # the first stdout line of ``relaybox serve`` and of a baseline
STARTUP_TIMEOUT_S = 30.0
STOP_GRACE_S = 5.0


class BenchError(RuntimeError):
    """The run could not complete (a server failed, a request timed out, an answer was wrong)."""


@dataclass
class Server:
    """A server subprocess; its stdout and stderr are the files ``<log_dir>/<name>.stdout|stderr``."""

    name: str
    process: subprocess.Popen[bytes]
    log_dir: Path
    url: str = ""
    tail_lines: int = 20  # of stderr, shown when it failed

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def address(self) -> tuple[str, int]:
        host, _, port = self.url.removeprefix("http://").rpartition(":")
        return host, int(port)

    def cpu_s(self) -> float:
        """User + system CPU seconds the server process has used so far."""
        return process_cpu_s(self.pid)

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


def baseline_command(kind: str) -> list[str]:
    """A bare server of ``baselines.py`` (``starlette`` or ``mcp``), served as relaybox is."""
    return [sys.executable, str(Path(__file__).with_name("baselines.py")), kind]


def raised_limits(*names: str) -> dict[str, str]:
    """``RELAYBOX_<name>`` settings that raise these limits out of the run's way."""
    return {f"RELAYBOX_{name}": str(RAISED_LIMIT) for name in names}


def logging_settings(access_log: bool) -> dict[str, str]:
    """The logging every server of a run gets, relaybox and the bare ones alike: relaybox's own
    configuration (``app.logs``, text format) with uvicorn's access log on (level info, as
    ``relaybox serve`` runs by default) or off (level warning: no access line is written)."""
    return {"RELAYBOX_LOG_FORMAT": "text", "RELAYBOX_LOG_LEVEL": "info" if access_log else "warning"}


# The checkout this bench belongs to: its servers import relaybox from here.
CHECKOUT = Path(__file__).resolve().parent.parent


def server_env(data_dir: Path, settings: Mapping[str, str]) -> dict[str, str]:
    """The inherited environment minus any RELAYBOX_* setting, plus the run's ``settings``, with
    this bench's checkout first on ``PYTHONPATH`` (any inherited entries made absolute after it).
    The servers run in the work dir, so without it ``python -m app.cli`` would import relaybox from
    wherever the virtualenv's editable install points: a bench run from a second worktree sharing
    one virtualenv would measure the first worktree's code."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("RELAYBOX_")}
    inherited = [os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([str(CHECKOUT), *inherited])
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
) -> Server:
    """Start a server whose first stdout line announces its URL once it listens, and wait for that
    line. ``settings`` are ``RELAYBOX_*`` settings for it (the data dir is ``<work_dir>/data``);
    ``fd_limit`` is its soft open-file limit. stdout and stderr go to files: uvicorn writes its
    access log to stdout, and a file, unlike an undrained pipe, never blocks the server."""
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
    server = Server(name, process, log_dir)
    try:
        wait_until_ready(server, timeout_s)
    except BaseException:  # the caller only stops what it got back: SIGTERM's SystemExit included
        server.stop()
        raise
    return server


def wait_until_ready(server: Server, timeout_s: float) -> None:
    """Until the server has announced its URL (it does once it accepts connections)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not server.alive():
            raise BenchError(
                f"{server.name} exited with {server.process.returncode}:\n{server.stderr_tail()}"
            )
        first, newline, _ = server.log("stdout").partition("\n")
        if newline and first.startswith(LISTENING):
            server.url = first.split(" on ", 1)[1].strip()
            return
        time.sleep(0.05)
    raise BenchError(f"{server.name} did not announce its URL within {timeout_s:.0f} s")
