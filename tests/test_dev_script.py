"""dev.py, the README's two set-up commands: a first run says what it is doing at each step; a failed
step and Ctrl-C are one line, never a traceback; Ctrl-C during ``python3 dev.py serve`` lets the
server stop by itself and passes on its status (130)."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.e2e.conftest import (
    SERVER_START_TIMEOUT_S,
    STOP_TIMEOUT_S,
    TRACEBACK,
    LineReader,
    child_environment,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
# Runs dev.py with Ctrl-C's default action restored, as in a terminal (where tests run it may be
# ignored, and an ignored signal stays ignored across exec).
WITH_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.executable, sys.argv)"
)
LISTENING = re.compile(r"^relaybox is listening on http://\S+$")


def load_dev(root: Path) -> Any:
    """dev.py as a module, set up to install into ``root``/.venv."""
    spec = importlib.util.spec_from_file_location("dev_under_test", REPO_ROOT / "dev.py")
    assert spec is not None and spec.loader is not None
    dev: Any = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dev)
    dev.ROOT, dev.VENV = root, root / ".venv"
    dev.BIN = dev.VENV / "bin"
    dev.STAMP = dev.VENV / ".relaybox-installed"
    return dev


class FakeInstall:
    """Stands in for venv and pip: records each command; ``fail`` makes one raise instead."""

    def __init__(self, dev: Any, fail: Callable[[list[str]], None] | None = None) -> None:
        self.bin: Path = dev.BIN
        self.commands: list[list[str]] = []
        self.fail = fail
        dev.venv = SimpleNamespace(EnvBuilder=self.builder)
        dev.subprocess = SimpleNamespace(run=self.run, CalledProcessError=subprocess.CalledProcessError)

    def builder(self, **options: Any) -> SimpleNamespace:
        def create(path: Path) -> None:
            self.bin.mkdir(parents=True)
            (self.bin / "python").touch()

        return SimpleNamespace(create=create)

    def run(self, command: list[str], check: bool) -> subprocess.CompletedProcess[str]:
        assert check
        self.commands.append(command[6:])  # after `python -m pip install --disable-pip-version-check -q`
        if self.fail is not None:
            self.fail(command)
        if "-e" in command:
            (self.bin / "relaybox").touch()
        return subprocess.CompletedProcess(command, 0)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\n")
    return tmp_path


def test_a_first_run_says_what_it_is_doing_at_each_step_and_a_later_one_says_nothing(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dev = load_dev(root)
    install = FakeInstall(dev)
    dev.ensure_environment()
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == [
        "dev.py: creating the virtual environment .venv …",
        "dev.py: upgrading pip in .venv …",
        "dev.py: installing relaybox and its dependencies into .venv (a few minutes the first time) …",
    ]
    assert re.fullmatch(r"dev\.py: \.venv is ready \(\d+ s\)", lines[3]), lines
    assert len(lines) == 4
    assert install.commands == [["--upgrade", "pip"], ["-e", f"{root}[all,test]"]]

    dev.ensure_environment()
    assert capsys.readouterr().out == ""
    assert len(install.commands) == 2

    (root / "pyproject.toml").write_text("[project]\nname = 'changed'\n")
    dev.ensure_environment()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "dev.py: pyproject.toml changed since .venv was set up: installing again …"
    assert "creating" not in " ".join(lines)
    assert len(install.commands) == 4


def failing(error: BaseException) -> Callable[[list[str]], None]:
    def fail(command: list[str]) -> None:
        if "-e" in command:
            raise error

    return fail


@pytest.mark.parametrize(
    ("error", "status", "last_line"),
    [
        (
            subprocess.CalledProcessError(1, ["pip", "install", "-e", "."]),
            1,
            "dev.py: `pip install -e .` failed (exit 1); its output is above",
        ),
        (KeyboardInterrupt(), 130, "dev.py: interrupted while setting up; the next run does that step again"),
    ],
    ids=["failed", "ctrl-c"],
)
def test_a_step_that_fails_or_is_interrupted_is_one_line_and_installs_again_next_time(
    root: Path,
    error: BaseException,
    status: int,
    last_line: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dev = load_dev(root)
    FakeInstall(dev, fail=failing(error))
    monkeypatch.setattr(sys, "argv", ["dev.py", "serve"])
    assert dev.entry() == status
    assert capsys.readouterr().out.splitlines()[-1] == last_line
    assert not dev.STAMP.exists()


@pytest.mark.e2e
def start_dev_serve(tmp_path: Path) -> tuple[subprocess.Popen[str], LineReader, LineReader]:
    """``python3 dev.py serve`` from a copy of the repository's dev.py whose .venv is set up already
    (its relaybox is this one), in a process group of its own, as a terminal starts it."""
    root = tmp_path / "repo"
    (root / ".venv" / "bin").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "dev.py", root / "dev.py")
    shutil.copy(REPO_ROOT / "pyproject.toml", root / "pyproject.toml")
    stamp = hashlib.sha256((root / "pyproject.toml").read_bytes()).hexdigest()
    (root / ".venv" / ".relaybox-installed").write_text(stamp)
    relaybox = root / ".venv" / "bin" / "relaybox"
    relaybox.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m app.cli "$@"\n')
    relaybox.chmod(0o755)

    command = ["dev.py", "serve", "--port", "0", "--data-dir", str(tmp_path / "data")]
    process = subprocess.Popen(
        [sys.executable, "-c", WITH_SIGINT, str(root / "dev.py"), *command[1:]],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_environment(tmp_path / "home"),
        cwd=tmp_path,
        text=True,
        start_new_session=True,  # its own process group, which Ctrl-C in a terminal signals as a whole
    )
    assert process.stdout is not None and process.stderr is not None
    return process, LineReader(process.stdout), LineReader(process.stderr)


def test_ctrl_c_during_dev_py_serve_stops_the_server_cleanly_with_status_130(tmp_path: Path) -> None:
    process, stdout, stderr = start_dev_serve(tmp_path)
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        first = stdout.next_line(deadline) or ""
        assert LISTENING.match(first.rstrip("\n")), (first, stderr.lines)
        os.killpg(process.pid, signal.SIGINT)
        assert process.wait(STOP_TIMEOUT_S) == 130
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(STOP_TIMEOUT_S)
        out, err = stdout.close(), stderr.close()
    assert TRACEBACK not in err and TRACEBACK not in out
    assert [line for line in err.splitlines() if not line.startswith("INFO:")] == [
        "relaybox stopped (Ctrl-C)"
    ]
    assert "Application shutdown complete." in err  # the server stopped by itself, not killed


def test_sigterm_to_dev_py_serve_alone_stops_its_server_too(tmp_path: Path) -> None:
    process, stdout, stderr = start_dev_serve(tmp_path)
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        first = stdout.next_line(deadline) or ""
        listening = LISTENING.match(first.rstrip("\n"))
        assert listening, (first, stderr.lines)
        port = int(listening[0].rsplit(":", 1)[1])
        process.send_signal(signal.SIGTERM)  # to dev.py only, as `kill PID` or a service manager does
        assert process.wait(STOP_TIMEOUT_S) == 0
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", port)) != 0  # nothing listens there any more
    finally:
        with contextlib.suppress(ProcessLookupError):  # a server child left behind, if any
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(STOP_TIMEOUT_S)
        out, err = stdout.close(), stderr.close()
    assert TRACEBACK not in err and TRACEBACK not in out
    assert "Application shutdown complete." in err  # the server stopped by itself, not killed
