"""What ``relaybox serve`` tells a person: the ``relaybox`` command of its next steps as it can be
run from their shell, and why it cannot listen (the processes themselves:
tests/e2e/test_serve_cli_e2e.py)."""

from __future__ import annotations

import errno
import os
import re
import socket
from pathlib import Path

import pytest

from app.cli import main
from app.serve import cannot_listen, command_for


@pytest.fixture
def script(tmp_path: Path) -> Path:
    """An installation's ``relaybox`` in ``repo/.venv/bin``."""
    folder = tmp_path / "repo" / ".venv" / "bin"
    folder.mkdir(parents=True)
    path = folder / "relaybox"
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_the_bare_name_when_path_finds_this_very_script(script: Path, tmp_path: Path) -> None:
    assert command_for(script, tmp_path, f"/usr/bin{os.pathsep}{script.parent}", None) == "relaybox"


def test_a_path_when_path_finds_none_or_another_relaybox(script: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "relaybox").write_text("#!/bin/sh\n")
    (other / "relaybox").chmod(0o755)
    repo = script.parents[2]
    for search_path in (None, "", str(other)):
        assert command_for(script, repo, search_path, str(repo)) == ".venv/bin/relaybox"


def test_relative_to_the_shells_folder_when_shorter(script: Path, tmp_path: Path) -> None:
    repo = script.parents[2]
    assert command_for(script, repo, "", str(repo)) == ".venv/bin/relaybox"  # python3 dev.py serve
    assert command_for(script, repo, "", None) == ".venv/bin/relaybox"  # no shell told us its folder
    assert command_for(script, repo / "docs", "", None) == "../.venv/bin/relaybox"
    assert command_for(script, script.parent, "", None) == "./relaybox"  # not looked up on PATH
    far = tmp_path.joinpath(*["x"] * len(str(script)))  # more ../ than the whole path has characters
    assert command_for(script, far, "", None) == str(script)


def test_absolute_when_the_shell_is_in_another_folder(script: Path, tmp_path: Path) -> None:
    # `python3 /path/to/repo/dev.py serve` from elsewhere: the server runs in the repository.
    repo = script.parents[2]
    assert command_for(script, repo, "", str(tmp_path)) == str(script)


def test_quoted_for_the_shell(tmp_path: Path) -> None:
    folder = tmp_path / "my stuff" / "bin"
    folder.mkdir(parents=True)
    path = folder / "relaybox"
    path.write_text("")
    assert command_for(path, tmp_path, "", str(tmp_path)) == "'my stuff/bin/relaybox'"


@pytest.mark.parametrize(
    ("error", "line"),
    [
        (
            OSError(errno.EADDRNOTAVAIL, "Cannot assign requested address"),
            "cannot listen on 10.9.9.9 port 8787: Cannot assign requested address: "
            "pass another --host or --port",
        ),
        (
            socket.gaierror(socket.EAI_NONAME, "Name or service not known"),
            "cannot listen on 10.9.9.9 port 8787: Name or service not known: pass another --host or --port",
        ),
        (
            OverflowError("bind(): port must be 0-65535."),
            "cannot listen on 10.9.9.9 port 8787: port must be 0-65535: pass another --host or --port",
        ),
    ],
)
def test_other_reasons_not_to_listen_are_one_line_too(error: OSError | OverflowError, line: str) -> None:
    assert cannot_listen("10.9.9.9", 8787, error) == line


def test_a_port_in_use_suggests_a_free_one_near_it() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = cannot_listen("127.0.0.1", port, OSError(errno.EADDRINUSE, "Address already in use"))
    assert line.startswith(f"port {port} is in use (another relaybox serve?): stop it, or pass --port ")
    suggested = re.search(r"--port (\d+)( \(any free port\))?$", line)
    assert suggested, line
    if suggested[2]:  # none of the next ten ports is free
        assert suggested[1] == "0"
    else:
        assert int(suggested[1]) in range(port + 1, port + 11)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", int(suggested[1])))  # free indeed


@pytest.mark.parametrize("port", ["70000", "-1", "http"])
def test_serve_refuses_a_port_that_is_not_one(port: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", "--port", port])
    assert exit_info.value.code == 2
    assert "is not a port number (0 to 65535)" in capsys.readouterr().err
