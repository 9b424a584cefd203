"""Acceptance: relayed envelopes and server messages reach a real ``relaybox tail`` / ``relaybox
phone run`` through a real server: the queue's newest 200 while away, then live on one connection."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from client import phone
from client.position import load_last_seq
from client.relay import Relay
from tests.e2e.conftest import BackgroundCli, Cli, CliResult

pytestmark = pytest.mark.e2e

CODE_LINE = re.compile(r"^pairing code: ([0-9]{6})$")
ANY_LINE = re.compile(r"^.+$")
QUEUE_CAP = 200
LINE_TIMEOUT_S = 15.0


def ok(result: CliResult) -> CliResult:
    assert result.returncode == 0, result
    assert "Traceback" not in result.stderr
    return result


@dataclass(frozen=True)
class Devices:
    phone: Path
    computer: Path
    phone_id: str
    computer_id: str


def paired_devices(cli: Cli, tmp_path: Path) -> Devices:
    """A virtual phone ``Pixel`` and a computer ``laptop``, paired through the CLI."""
    phone_state, computer_state = tmp_path / "phone.json", tmp_path / "computer.json"
    ok(cli.run("phone", "register", "--name", "Pixel", "--state", phone_state))
    pairing = cli.start("pair", "--name", "laptop", "--timeout", "60", "--state", computer_state)
    code = pairing.wait_for_line(CODE_LINE)[1]
    ok(cli.run("phone", "pair", code, "--state", phone_state))
    ok(pairing.finish())
    return Devices(
        phone_state,
        computer_state,
        json.loads(phone_state.read_text())["device_id"],
        json.loads(computer_state.read_text())["device_id"],
    )


def json_line(background: BackgroundCli) -> dict[str, object]:
    record: dict[str, object] = json.loads(background.wait_for_line(ANY_LINE, LINE_TIMEOUT_S)[0])
    return record


def stop(background: BackgroundCli) -> CliResult:
    """SIGTERM, as a service manager would stop it; the follower saves its place and exits 0."""
    assert background.process.poll() is None, background.close()
    background.process.terminate()
    return ok(background.finish())


def test_the_newest_200_wait_for_an_absent_computer_then_more_arrive_live(cli: Cli, tmp_path: Path) -> None:
    devices = paired_devices(cli, tmp_path)
    with Relay(devices.phone, phone.load(devices.phone)) as relay:
        sent = [relay.send_text(f"message {n}").seq for n in range(300)]
    assert sent == sorted(sent)

    drained = ok(cli.run("tail", "--once", "--json", "--idle", "2", "--state", devices.computer, timeout=60))
    records = [json.loads(line) for line in drained.stdout.splitlines()]
    assert len(records) == QUEUE_CAP
    assert [r["seq"] for r in records] == sent[-QUEUE_CAP:]
    assert [r["payload"]["text"] for r in records] == [f"message {n}" for n in range(100, 300)]
    assert {(r["event"], r["from"], r["type"]) for r in records} == {
        ("envelope", devices.phone_id, "clipboard")
    }
    assert load_last_seq(devices.computer) == sent[-1]
    assert "warning" not in drained.stderr

    tail = cli.start("tail", "--json", "--state", devices.computer)
    live: list[int] = []
    with Relay(devices.phone, phone.load(devices.phone)) as relay:
        for n in range(5):
            live.append(relay.send_text(f"live {n}").seq)
            record = json_line(tail)  # each arrives before the next is sent: on the open connection
            assert (record["seq"], record["payload"]) == (
                live[-1],
                {"type": "clipboard", "text": f"live {n}"},
            )
    stopped = stop(tail)
    assert stopped.stdout.count("\n") == 5  # nothing replayed from before, nothing repeated
    assert f"after seq {sent[-1]}" in stopped.stderr
    assert "reconnect" not in stopped.stderr and "connection lost" not in stopped.stderr
    assert load_last_seq(devices.computer) == live[-1]


def test_a_running_tail_shows_token_changes_and_texts_from_the_phone(cli: Cli, tmp_path: Path) -> None:
    devices = paired_devices(cli, tmp_path)
    tail = cli.start("tail", "--state", devices.computer)

    create = ("phone", "tokens", "create", "--state", devices.phone)
    ok(cli.run(*create, "--label", "cron", "--scope", "phone:control"))
    tail.wait_for_line(re.compile(r"^\[seq \d+\] tokens now: cron \(phone:control\)$"), LINE_TIMEOUT_S)
    ok(cli.run(*create, "--label", "backup"))
    # Tokens created within one second are listed in token-id order, which is random.
    listed = tail.wait_for_line(re.compile(r"^\[seq \d+\] tokens now: (.+, .+)$"), LINE_TIMEOUT_S)[1]
    assert sorted(listed.split(", ")) == ["backup", "cron (phone:control)"]

    sent = ok(cli.run("phone", "send", "hello computer", "--to", "laptop", "--state", devices.phone))
    assert re.fullmatch(r"sent to laptop \(seq \d+, msg_[0-9a-f]+\)\n", sent.stdout)
    tail.wait_for_line(re.compile(r"^\[seq \d+\] clipboard from Pixel: hello computer$"), LINE_TIMEOUT_S)
    assert "warning" not in stop(tail).stderr


def test_the_phone_hears_texts_from_the_computer_and_its_disconnect(cli: Cli, tmp_path: Path) -> None:
    devices = paired_devices(cli, tmp_path)
    run = cli.start("phone", "run", "--state", devices.phone)
    tail = cli.start("tail", "--state", devices.computer)

    sent = ok(cli.run("send-text", "hello phone", "--state", devices.computer))
    assert sent.stdout.startswith("sent to Pixel (seq ")
    run.wait_for_line(re.compile(r"^\[seq \d+\] clipboard from laptop: hello phone$"), LINE_TIMEOUT_S)

    ok(cli.run("phone", "send", "are you there?", "--state", devices.phone))
    tail.wait_for_line(re.compile(r"^\[seq \d+\] clipboard from Pixel: are you there\?$"), LINE_TIMEOUT_S)

    # The computer is removed while its tail is connected: the stream ends and it stops.
    token = json.loads(devices.computer.read_text())["device_token"]
    with httpx.Client(base_url=cli.server_url, timeout=10, trust_env=False) as http:
        response = http.delete("/v1/devices/me", headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 204
    run.wait_for_line(
        re.compile(rf"^\[seq \d+\] push disconnect: device {devices.computer_id} \(laptop\) disconnected$"),
        LINE_TIMEOUT_S,
    )
    ended = tail.finish(timeout=LINE_TIMEOUT_S)  # the stream ends; the reconnect is refused
    assert ended.returncode == 1
    assert ended.stderr.splitlines()[-1].startswith("error: credential_revoked: ")
    assert "Traceback" not in ended.stderr
    stop(run)
