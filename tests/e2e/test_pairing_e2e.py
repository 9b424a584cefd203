"""Acceptance: a virtual phone and a computer pair through a real server, using only the CLI."""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path

import pytest

from core.domain.keys import decode_public_key
from core.domain.safety import format_safety_number, safety_number
from core.domain.secrets import SCANNER_PATTERN, SENDER_TOKEN_PATTERN
from tests.e2e.conftest import Cli, CliResult

pytestmark = pytest.mark.e2e

CODE_LINE = re.compile(r"^pairing code: ([0-9]{6})$")
SAFETY_LINE = re.compile(r"^safety number: ((?:[0-9]{5} ){11}[0-9]{5})$", re.MULTILINE)
PAIR_TIMEOUT_S = "60"


def safety_number_in(output: str) -> str:
    match = SAFETY_LINE.search(output)
    assert match is not None, output
    return match[1].replace(" ", "")


def ok(result: CliResult) -> CliResult:
    assert result.returncode == 0, result
    assert "Traceback" not in result.stderr
    return result


def register_phone(cli: Cli, state: Path, *extra: str) -> None:
    ok(cli.run("phone", "register", "--name", "Test Phone", "--state", state, *extra))


def test_phone_and_computer_pair_and_show_the_same_safety_number(cli: Cli, tmp_path: Path) -> None:
    phone_state = tmp_path / "phone.json"
    computer_state = tmp_path / "computer.json"
    register_phone(cli, phone_state, "--server", cli.server_url)

    pairing = cli.start(
        "pair", "--name", "test laptop", "--timeout", PAIR_TIMEOUT_S, "--state", computer_state
    )
    code = pairing.wait_for_line(CODE_LINE)[1]
    confirmed = ok(cli.run("phone", "pair", code, "--state", phone_state))
    finished = ok(pairing.finish())

    assert f"type it into your phone: relaybox phone pair {code}\n" in finished.stdout
    assert "paired with test laptop (cli)\n" in confirmed.stdout
    assert "paired with Test Phone\n" in finished.stdout
    on_phone = safety_number_in(confirmed.stdout)
    on_computer = safety_number_in(finished.stdout)
    assert on_phone == on_computer
    assert re.fullmatch(r"[0-9]{60}", on_phone)

    phone = json.loads(phone_state.read_text())
    computer = json.loads(computer_state.read_text())
    assert on_phone == safety_number(
        decode_public_key(phone["public_key"]), decode_public_key(computer["public_key"])
    )
    assert phone["peers"][computer["device_id"]]["public_key"] == computer["public_key"]
    assert computer["peers"][phone["device_id"]]["public_key"] == phone["public_key"]
    assert computer["pending"] is None
    for path in (phone_state, computer_state):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert SCANNER_PATTERN.search(path.read_text()) is None

    shown = ok(cli.run("phone", "show", "--state", phone_state))
    assert computer["device_id"] in shown.stdout
    assert f"safety number: {format_safety_number(on_phone)}\n" in shown.stdout
    assert phone["device_token"] not in shown.stdout
    assert phone["secret_key"] not in shown.stdout


def test_sender_tokens_are_created_listed_and_revoked_through_the_cli(cli: Cli, tmp_path: Path) -> None:
    phone_state = tmp_path / "phone.json"
    register_phone(cli, phone_state)

    created = ok(
        cli.run(
            "phone", "tokens", "create", "--label", "ci job", "--priority-cap", "high", "--state", phone_state
        )
    )
    token = created.stdout.strip()
    assert SENDER_TOKEN_PATTERN.fullmatch(token), created
    assert "shown only this once" in created.stderr
    assert token not in created.stderr
    token_id = re.search(r"\b(tok_[0-9a-f]+)\b", created.stderr)
    assert token_id is not None, created.stderr

    listed = ok(cli.run("phone", "tokens", "list", "--state", phone_state))
    assert token_id[1] in listed.stdout
    assert "ci job" in listed.stdout
    assert token not in listed.stdout

    revoked = ok(cli.run("phone", "tokens", "revoke", token_id[1], "--state", phone_state))
    assert token_id[1] in revoked.stdout
    after = ok(cli.run("phone", "tokens", "list", "--state", phone_state))
    assert token_id[1] not in after.stdout
    assert SCANNER_PATTERN.search(phone_state.read_text()) is None

    again = cli.run("phone", "tokens", "revoke", "tok_" + "0" * 32, "--state", phone_state)
    assert again.returncode == 1
    assert again.stderr.startswith("error: not_found: ")


def test_a_wrong_pairing_code_is_refused_and_the_right_one_still_works(cli: Cli, tmp_path: Path) -> None:
    phone_state = tmp_path / "phone.json"
    computer_state = tmp_path / "computer.json"
    register_phone(cli, phone_state)
    pairing = cli.start("pair", "--timeout", PAIR_TIMEOUT_S, "--state", computer_state)
    live = pairing.wait_for_line(CODE_LINE)[1]
    wrong = f"{(int(live) + 1) % 1_000_000:06d}"

    refused = cli.run("phone", "pair", wrong, "--state", phone_state)
    assert refused.returncode == 1
    assert refused.stderr.startswith("error: invalid_code: ")
    assert refused.stderr.count("\n") == 1
    assert refused.stdout == ""

    ok(cli.run("phone", "pair", live, "--state", phone_state))
    assert "paired with Test Phone\n" in ok(pairing.finish()).stdout


def test_pair_gives_up_when_nobody_confirms_within_its_timeout(cli: Cli, tmp_path: Path) -> None:
    result = cli.run("pair", "--timeout", "1.5", "--state", tmp_path / "computer.json")
    assert result.returncode == 1
    assert CODE_LINE.search(result.stdout.splitlines()[0])
    assert result.stderr.startswith("error: pairing_timeout: ")
