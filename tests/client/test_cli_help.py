"""Every client command explains itself with --help, and failures are one line on stderr."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli import main

COMMANDS: list[tuple[list[str], list[str]]] = [
    (["phone"], ["register", "invite", "pair", "show", "tokens"]),
    (["phone", "register"], ["--server", "--name", "--app-build", "--invite", "--force", "--state"]),
    (["phone", "invite"], ["--state"]),
    (["invite"], ["--data-dir"]),
    (["phone", "pair"], ["CODE", "--state"]),
    (["phone", "show"], ["--state"]),
    (["phone", "tokens"], ["create", "list", "revoke"]),
    (["phone", "tokens", "create"], ["--label", "--scope", "--priority-cap", "--state"]),
    (["phone", "tokens", "list"], ["--state"]),
    (["phone", "tokens", "revoke"], ["ID", "--state"]),
    (["pair"], ["--server", "--name", "--surface", "--timeout", "--force", "--state"]),
]


@pytest.mark.parametrize(("command", "options"), COMMANDS, ids=[" ".join(c) for c, _ in COMMANDS])
def test_help_exits_0_and_names_every_option(
    command: list[str], options: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([*command, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: relaybox {' '.join(command)}")
    for option in options:
        assert option in out
    description = out.split("\n\n")[1]
    assert len(description.split()) >= 5  # a sentence, not just the usage line


def test_the_top_level_help_lists_the_client_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "phone" in out
    assert "pair" in out


@pytest.mark.parametrize("command", [["phone"], ["phone", "tokens"]], ids=["phone", "phone tokens"])
def test_a_group_without_a_subcommand_is_a_usage_error(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(command)
    assert exit_info.value.code == 2
    assert "required" in capsys.readouterr().err


def test_a_missing_state_file_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["phone", "show", "--state", str(tmp_path / "absent.json")]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: no_state: ")
    assert captured.err.count("\n") == 1


def test_an_unusable_server_url_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "computer.json"
    assert main(["pair", "--server", "ftp://example.org", "--state", str(state)]) == 1
    assert capsys.readouterr().err.startswith("error: invalid_server: ")
    assert not state.exists()


def test_an_unreachable_server_is_one_error_line_and_writes_no_state(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "phone.json"
    assert main(["phone", "register", "--server", "http://127.0.0.1:1", "--state", str(state)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: connection_failed: ")
    assert err.count("\n") == 1
    assert not state.exists()
