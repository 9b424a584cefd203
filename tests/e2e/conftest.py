"""End-to-end fixtures: a real ``relaybox serve`` process and the ``relaybox`` CLI as subprocesses.

Every wait is bounded. Output pipes are drained by reader threads (uvicorn's access log goes to
stdout), and every process, thread and pipe is closed at teardown. A Python traceback on the
server's stderr fails the test.
"""

from __future__ import annotations

import json
import os
import queue
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Self

import httpx
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
RELAYBOX = [sys.executable, "-m", "app.cli"]
SERVER_START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0
CLI_TIMEOUT_S = 30.0
HEALTH_POLL_INTERVAL_S = 0.05
TRACEBACK = "Traceback (most recent call last)"
LISTENING = re.compile(r"^relaybox is listening on (http://\S+)$")


def child_environment(home: Path) -> dict[str, str]:
    """The parent's environment without any ``RELAYBOX_*`` setting, with a private home folder (and
    downloads folder: ``$HOME/Downloads``, the default when ``XDG_DOWNLOAD_DIR`` is not set)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("RELAYBOX_")}
    env.pop("XDG_DOWNLOAD_DIR", None)
    env["HOME"] = str(home)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env["PYTHONIOENCODING"] = "utf-8"
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    return env


class LineReader:
    """Drains one text pipe on a thread, keeping every line and handing them out in order."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._queue: queue.Queue[str | None] = queue.Queue()
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        for line in self._stream:
            self.lines.append(line)
            self._queue.put(line)
        self._queue.put(None)

    def next_line(self, deadline: float) -> str | None:
        """The next line, ``None`` at end of stream; ``TimeoutError`` when the deadline passes."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        try:
            line = self._queue.get(timeout=remaining)
        except queue.Empty:
            raise TimeoutError from None
        if line is None:
            self._queue.put(None)  # stay at end of stream for later callers
        return line

    def close(self) -> str:
        """Wait for end of stream (the process has exited), close the pipe, return all output."""
        self._thread.join(STOP_TIMEOUT_S)
        self._stream.close()
        return "".join(self.lines)


@dataclass(frozen=True)
class CliResult:
    returncode: int
    stdout: str
    stderr: str


class BackgroundCli:
    """A running ``relaybox`` command whose stdout can be read line by line while it runs."""

    def __init__(self, args: Sequence[str], env: dict[str, str], cwd: Path) -> None:
        self.args = list(args)
        self.process = subprocess.Popen(
            [*RELAYBOX, *self.args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            text=True,
            encoding="utf-8",
        )
        assert self.process.stdout is not None
        assert self.process.stderr is not None
        self._stdout = LineReader(self.process.stdout)
        self._stderr = LineReader(self.process.stderr)
        self._closed: CliResult | None = None

    def wait_for_line(self, pattern: re.Pattern[str], timeout: float = CLI_TIMEOUT_S) -> re.Match[str]:
        """The first stdout line matching ``pattern``; fails the test on timeout or exit."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._stdout.next_line(deadline)
            except TimeoutError:
                pytest.fail(
                    f"`relaybox {' '.join(self.args)}` printed no line like {pattern.pattern!r} "
                    f"within {timeout} s; stdout so far: {''.join(self._stdout.lines)!r}"
                )
            if line is None:
                result = self.close()
                pytest.fail(
                    f"`relaybox {' '.join(self.args)}` ended before printing {pattern.pattern!r}: {result}"
                )
            match = pattern.search(line.rstrip("\n"))
            if match:
                return match

    def stdout_so_far(self) -> str:
        """Every line the command has printed so far, whether or not ``wait_for_line`` read it."""
        return "".join(self._stdout.lines)

    def finish(self, timeout: float = CLI_TIMEOUT_S) -> CliResult:
        """Wait for the command to exit by itself (failing the test if it does not) and collect output."""
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            result = self.close()
            pytest.fail(f"`relaybox {' '.join(self.args)}` did not exit within {timeout} s: {result}")
        return self.close()

    def close(self) -> CliResult:
        """Stop the command if it still runs, then close its pipes. Safe to call twice."""
        if self._closed is None:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait(STOP_TIMEOUT_S)
            stdout = self._stdout.close()
            stderr = self._stderr.close()
            self._closed = CliResult(self.process.returncode, stdout, stderr)
        return self._closed


class Cli:
    """Runs ``relaybox`` as a subprocess against one server, in a private home and state folder."""

    def __init__(self, server_url: str, workdir: Path) -> None:
        self.server_url = server_url
        self.workdir = workdir
        self.state_dir = workdir / "state"
        home = workdir / "home"
        home.mkdir(parents=True, exist_ok=True)
        self.env = child_environment(home)
        self.env["RELAYBOX_SERVER"] = server_url
        self.env["RELAYBOX_CLIENT_STATE_DIR"] = str(self.state_dir)
        self._background: list[BackgroundCli] = []

    def run(self, *args: str | Path, timeout: float = CLI_TIMEOUT_S) -> CliResult:
        """Run a command to completion (killed and failing the test after ``timeout``)."""
        argv = [str(arg) for arg in args]
        try:
            done = subprocess.run(
                [*RELAYBOX, *argv],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                env=self.env,
                cwd=self.workdir,
                text=True,
                encoding="utf-8",
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            pytest.fail(f"`relaybox {' '.join(argv)}` did not finish within {timeout} s")
        return CliResult(done.returncode, done.stdout, done.stderr)

    def start(self, *args: str | Path) -> BackgroundCli:
        """Start a command in the background; it is stopped at teardown if still running."""
        background = BackgroundCli([str(arg) for arg in args], self.env, self.workdir)
        self._background.append(background)
        return background

    def close(self) -> None:
        for background in self._background:
            background.close()


class RelayboxServer:
    """``relaybox serve --port 0`` in its own data folder, stopped with SIGTERM (then SIGKILL).

    ``env``: extra variables for the server (settings such as ``RELAYBOX_DOCUMENTS_ENABLED``);
    ``port``: a fixed port (a restarted server keeps its clients' URL), else any free one.
    """

    def __init__(self, workdir: Path, env: Mapping[str, str] | None = None, *, port: int = 0) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.stderr_path = workdir / "server.stderr"
        self.url = ""
        self.port = port
        with self.stderr_path.open("w", encoding="utf-8") as stderr_file:
            self.process = subprocess.Popen(
                [
                    *RELAYBOX,
                    "serve",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--data-dir",
                    str(workdir / "data"),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=stderr_file,
                env=child_environment(workdir) | dict(env or {}),
                cwd=workdir,
                text=True,
                encoding="utf-8",
            )
        assert self.process.stdout is not None
        self._stdout = LineReader(self.process.stdout)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def wait_until_ready(self, timeout: float = SERVER_START_TIMEOUT_S) -> str:
        deadline = time.monotonic() + timeout
        match = None
        while match is None:  # the first line, or with RELAYBOX_LOG_FORMAT=json the first such record
            try:
                line = self._stdout.next_line(deadline)
            except TimeoutError:
                pytest.fail(f"the server printed no URL within {timeout} s; stderr: {self.stderr()}")
            if line is None or not line.startswith("{"):
                match = LISTENING.match((line or "").rstrip("\n"))
                if match is None:
                    pytest.fail(f"unexpected first line from the server: {line!r}; stderr: {self.stderr()}")
            else:
                match = LISTENING.match(json.loads(line).get("message", ""))
        self.url = match[1]
        if self.port:  # reached here, whatever RELAYBOX_PUBLIC_URL (which it announces) names in front
            self.url = f"http://127.0.0.1:{self.port}"
        with httpx.Client(timeout=2.0, trust_env=False) as http:
            while True:  # bounded: the deadline below
                if self.process.poll() is not None:
                    pytest.fail(f"the server exited with {self.process.returncode}; stderr: {self.stderr()}")
                try:
                    if http.get(f"{self.url}/healthz").status_code == 200:
                        return self.url
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    pytest.fail(
                        f"{self.url}/healthz did not answer within {timeout} s; stderr: {self.stderr()}"
                    )
                time.sleep(HEALTH_POLL_INTERVAL_S)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(STOP_TIMEOUT_S)
        self._stdout.close()

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def stdout(self) -> str:
        """Everything the server has printed on stdout so far (the access log follows the URL line)."""
        return "".join(self._stdout.lines)


def free_port() -> int:
    """A port free on loopback now (for a server that must know its port before it starts)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def relaybox_process(tmp_path: Path) -> Iterator[RelayboxServer]:
    """A freshly started real server, ready; fails the test if it logged a traceback."""
    with RelayboxServer(tmp_path / "server") as server:
        server.wait_until_ready()
        yield server
    log = server.stderr()
    if TRACEBACK in log:
        pytest.fail(f"the server wrote a traceback to stderr:\n{log}")


@pytest.fixture
def relaybox_server(relaybox_process: RelayboxServer) -> str:
    """The base URL of ``relaybox_process``."""
    return relaybox_process.url


@pytest.fixture
def cli(relaybox_server: str, tmp_path: Path) -> Iterator[Cli]:
    """The ``relaybox`` command pointed at ``relaybox_server`` (through ``RELAYBOX_SERVER``)."""
    runner = Cli(relaybox_server, tmp_path / "cli")
    try:
        yield runner
    finally:
        runner.close()
