"""Private PostgreSQL and Redis servers for tests that stop, kill or restart them.

The machine's shared servers are never touched: each instance here listens on its own free
loopback port with its files in its own temporary folder, and is removed at the end. Missing
binaries skip the test (or fail it under ``RELAYBOX_REQUIRE_SERVICES=1``).
"""

from __future__ import annotations

import contextlib
import glob
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Self

import redis

from tests.services import unavailable

START_TIMEOUT_S = 30.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, timeout: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout} s") from None
            time.sleep(0.05)


class PrivateRedis:
    """``redis-server`` on a free port, in memory only; ``kill`` and ``start`` it at will; with
    ``password`` it requires that password (``url`` does not carry it)."""

    def __init__(self, password: str | None = None) -> None:
        self.password = password
        binary = shutil.which("redis-server")
        if binary is None:
            unavailable("redis-server", FileNotFoundError("redis-server is not on PATH"))
        self.binary = str(binary)
        self.folder = Path(tempfile.mkdtemp(prefix="relaybox-redis-"))
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        arguments = ["--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        if self.password is not None:
            arguments += ["--requirepass", self.password]
        self.process = subprocess.Popen(
            [self.binary, *arguments, "--dir", str(self.folder)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port)

    def kill(self) -> None:
        """SIGKILL: every connection drops at once, nothing is saved."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)
        self.process = None

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()
        shutil.rmtree(self.folder, ignore_errors=True)


def postgres_binaries() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if not found:
        unavailable("PostgreSQL server binaries", FileNotFoundError("no /usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent


class PrivatePostgres:
    """A PostgreSQL cluster of its own (run as the ``postgres`` user), trust auth, on a free port."""

    def __init__(self) -> None:
        self.bin = postgres_binaries()
        if shutil.which("runuser") is None:
            unavailable("runuser", FileNotFoundError("runuser is needed to run PostgreSQL as postgres"))
        self.folder = Path(tempfile.mkdtemp(prefix="relaybox-pg-"))
        shutil.chown(self.folder, "postgres", "postgres")
        self.data = self.folder / "data"
        self.port = free_port()
        self._as_postgres(str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres")

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _as_postgres(self, *argv: str) -> None:
        done = subprocess.run(
            ["runuser", "-u", "postgres", "--", *argv],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed: {done.stdout}{done.stderr}")

    def start(self) -> None:
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._as_postgres(
            str(self.bin / "pg_ctl"),
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.folder / "log"),
            "-w",
            "start",
        )

    def stop(self, mode: str = "fast") -> None:
        """``fast``: connections are terminated and the server shuts down; ``immediate``: as a crash."""
        self._as_postgres(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(RuntimeError):  # already stopped
            self.stop("immediate")
        shutil.rmtree(self.folder, ignore_errors=True)
