"""``relaybox serve`` started as a person starts it: what keeps it from starting (a port in use,
0.0.0.0 without a public URL) and Ctrl-C are one line on stderr and a non-zero exit status, never
a traceback; the next steps it prints name a ``relaybox`` command that runs from where it was
started."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sysconfig
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import (
    RELAYBOX,
    SERVER_START_TIMEOUT_S,
    STOP_TIMEOUT_S,
    TRACEBACK,
    LineReader,
    child_environment,
)

pytestmark = pytest.mark.e2e

LISTENING = re.compile(r"^relaybox is listening on (http://\S+)$")
REGISTER = re.compile(r"^  (.+) phone register --server (http://\S+)   # a virtual phone$")
WEB_APP = re.compile(r"^  web app: (http://\S+)/app/   # open it on your phone")


def environment(tmp_path: Path) -> dict[str, str]:
    """A private home, and a PATH without this interpreter's scripts folder (as after dev.py, where
    ``relaybox`` is not on PATH)."""
    env = child_environment(tmp_path / "home")
    scripts = Path(sysconfig.get_path("scripts")).resolve()
    folders = env.get("PATH", "").split(os.pathsep)
    env["PATH"] = os.pathsep.join(f for f in folders if f and Path(f).resolve() != scripts)
    env["PWD"] = str(tmp_path)  # the shell's folder, where the server runs
    return env


def serve(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RELAYBOX, "serve", "--data-dir", str(tmp_path / "data"), *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=environment(tmp_path),
        cwd=tmp_path,
        text=True,
        timeout=SERVER_START_TIMEOUT_S,
        check=False,
    )


def one_line(stderr: str) -> str:
    assert TRACEBACK not in stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


def test_a_port_in_use_is_one_line_saying_what_to_do(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = serve(tmp_path, "--port", str(port))
    assert done.returncode == 1
    line = one_line(done.stderr)
    expected = rf"error: port {port} is in use \(another relaybox serve\?\): stop it, or pass --port (\d+)"
    match = re.fullmatch(rf"{expected}( \(any free port\))?", line)
    assert match, line
    assert int(match[1]) != port
    assert done.stdout == ""


def test_listening_on_all_interfaces_without_a_public_url_is_one_line_saying_what_to_do(
    tmp_path: Path,
) -> None:
    done = serve(tmp_path, "--host", "0.0.0.0", "--port", "0")  # noqa: S104  (refused: the point)
    assert done.returncode == 1
    line = one_line(done.stderr)
    assert line.startswith("error: listening on 0.0.0.0 needs RELAYBOX_PUBLIC_URL, the https URL"), line
    assert "leave --host at 127.0.0.1" in line
    assert done.stdout == ""


def test_ctrl_c_stops_the_server_with_130_and_one_line_and_the_next_steps_run(tmp_path: Path) -> None:
    env = environment(tmp_path)
    server = subprocess.Popen(
        [*RELAYBOX, "serve", "--port", "0", "--data-dir", str(tmp_path / "data")],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
        text=True,
    )
    assert server.stdout is not None and server.stderr is not None
    stdout, stderr = LineReader(server.stdout), LineReader(server.stderr)
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        first = stdout.next_line(deadline) or ""
        listening = LISTENING.match(first.rstrip("\n"))
        assert listening, (first, stderr.lines)
        web_app = WEB_APP.match((stdout.next_line(deadline) or "").rstrip("\n"))
        assert web_app and web_app[1] == listening[1], stdout.lines  # the web app first, at this URL
        register = None
        while register is None:
            line = stdout.next_line(deadline)
            assert line is not None, stdout.lines
            register = REGISTER.match(line.rstrip("\n"))
        server.send_signal(signal.SIGINT)
        assert server.wait(STOP_TIMEOUT_S) == 130
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(STOP_TIMEOUT_S)
        out, err = stdout.close(), stderr.close()
    assert TRACEBACK not in err and TRACEBACK not in out
    assert [line for line in err.splitlines() if not line.startswith("INFO:")] == [
        "relaybox stopped (Ctrl-C)"
    ]

    # The command the next steps name is this installation's relaybox, and runs as printed.
    command = register[1]
    assert command != "relaybox"  # not on this PATH
    ran = subprocess.run(
        [*shlex.split(command), "--help"],
        capture_output=True,
        env=env,
        cwd=tmp_path,
        text=True,
        timeout=SERVER_START_TIMEOUT_S,
        check=False,
    )
    assert ran.returncode == 0, ran
    assert ran.stdout.startswith("usage: relaybox")
    scripts = Path(sysconfig.get_path("scripts")).resolve()
    assert (tmp_path / shlex.split(command)[0]).resolve() == scripts / "relaybox"
