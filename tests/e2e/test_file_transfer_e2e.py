"""Acceptance: a 20 MB file goes from a computer (`relaybox send-file`) to the virtual phone
(`relaybox phone run`) through a real server's embedded object store, arrives byte-identical, and
the store only ever holds ciphertext; declines, cancels and a tampered chunk end cleanly."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from tests.e2e.conftest import Cli, CliResult, RelayboxServer
from tests.e2e.test_relay_e2e import Devices, ok, paired_devices

pytestmark = pytest.mark.e2e

MARKER = b"RELAYBOX-PLAINTEXT-MARKER-7f3a"
SIZE = 20 * 1024 * 1024
OFFERED = re.compile(r"^offered (.+?) \((\d+) bytes\) to (.+) \(transfer (xfr_[0-9a-f]{32})\)$")
DRAIN_TIMEOUT_S = 120.0


def marked_file(folder: Path, size: int = SIZE) -> Path:
    """``size`` bytes in which the marker recurs every 64 KiB (pseudo-random filler between)."""
    block = bytearray()
    counter = 0
    while len(block) < size:
        block += MARKER + hashlib.sha256(counter.to_bytes(8, "big")).digest() * 2040
        counter += 1
    path = folder / "holiday video.bin"
    path.write_bytes(bytes(block[:size]))
    return path


def store_files(server: RelayboxServer) -> list[Path]:
    root = server.stderr_path.parent / "data" / "objects"
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def send(cli: Cli, devices: Devices, file: Path) -> str:
    sent = ok(cli.run("send-file", file, "--state", devices.computer, timeout=DRAIN_TIMEOUT_S))
    match = OFFERED.match(sent.stdout.strip())
    assert match, sent
    return match[4]


def drain(cli: Cli, state: Path, *options: str) -> list[dict[str, object]]:
    """Run a device's follower until its queue is drained; its JSON records."""
    role = "phone" if "phone" in state.name else "computer"
    command = ("phone", "run") if role == "phone" else ("tail",)
    result: CliResult = ok(
        cli.run(
            *command, "--once", "--idle", "2", "--json", *options, "--state", state, timeout=DRAIN_TIMEOUT_S
        )
    )
    return [json.loads(line) for line in result.stdout.splitlines()]


def of_type(records: list[dict[str, object]], kind: str) -> list[dict[str, object]]:
    return [record for record in records if record.get("type") == kind]


def downloads_of(cli: Cli, role: str) -> Path:
    """Where a device saves what it receives without --downloads: its own folder in the (private)
    home's Downloads."""
    return Path(cli.env["HOME"]) / "Downloads" / ("relaybox-phone" if role == "phone" else "relaybox")


def test_a_20_mb_file_reaches_the_phone_byte_identical_and_the_store_holds_only_ciphertext(
    cli: Cli, relaybox_process: RelayboxServer, tmp_path: Path
) -> None:
    devices = paired_devices(cli, tmp_path)
    original = marked_file(tmp_path)
    transfer_id = send(cli, devices, original)

    stored = store_files(relaybox_process)
    assert len(stored) == 20
    assert sum(p.stat().st_size for p in stored) == SIZE + 20 * 16  # ciphertext plus one tag a chunk
    for path in stored:
        data = path.read_bytes()
        assert MARKER not in data, path
    database = (relaybox_process.stderr_path.parent / "data" / "relaybox.db").read_bytes()
    assert MARKER not in database
    assert b"holiday video" not in database  # the name travels only inside the offer's envelope

    records = drain(cli, devices.phone)
    saved = of_type(records, "file_saved")
    assert [record["transfer_id"] for record in saved] == [transfer_id]
    received = Path(str(saved[0]["path"]))
    assert received.name == "holiday video.bin"
    assert received.parent == downloads_of(cli, "phone")
    assert hashlib.sha256(received.read_bytes()).digest() == hashlib.sha256(original.read_bytes()).digest()
    assert store_files(relaybox_process) == []  # completed: the objects are gone

    answers = drain(cli, devices.computer)
    assert [r["type"] for r in answers if str(r.get("type", "")).startswith("file_")] == [
        "file_accept",
        "file_complete",
    ]


def test_a_declined_file_is_deleted_and_the_sender_hears_it(
    cli: Cli, relaybox_process: RelayboxServer, tmp_path: Path
) -> None:
    devices = paired_devices(cli, tmp_path)
    transfer_id = send(cli, devices, marked_file(tmp_path, 3 * 1024 * 1024))
    declined = of_type(drain(cli, devices.phone, "--decline-files"), "file_declined")
    assert [record["transfer_id"] for record in declined] == [transfer_id]
    assert store_files(relaybox_process) == []
    assert not downloads_of(cli, "phone").exists()
    heard = of_type(drain(cli, devices.computer), "file_decline")
    assert [(r["transfer_id"], r["reason"]) for r in heard] == [(transfer_id, "declined")]


def test_a_cancelled_transfer_fails_cleanly_on_the_phone(
    cli: Cli, relaybox_process: RelayboxServer, tmp_path: Path
) -> None:
    devices = paired_devices(cli, tmp_path)
    transfer_id = send(cli, devices, marked_file(tmp_path, 2 * 1024 * 1024))
    assert ok(cli.run("cancel-file", transfer_id, "--state", devices.computer)).stdout.startswith("cancelled")
    assert store_files(relaybox_process) == []
    records = drain(cli, devices.phone)
    assert [r["transfer_id"] for r in of_type(records, "file_failed")] == [transfer_id]
    assert [r["transfer_id"] for r in of_type(records, "file_cancel")] == [transfer_id]
    downloads = downloads_of(cli, "phone")
    assert not downloads.exists() or list(downloads.iterdir()) == []


def test_a_tampered_chunk_is_rejected_and_nothing_is_saved(
    cli: Cli, relaybox_process: RelayboxServer, tmp_path: Path
) -> None:
    devices = paired_devices(cli, tmp_path)
    transfer_id = send(cli, devices, marked_file(tmp_path, 2 * 1024 * 1024 + 5))
    chunk = store_files(relaybox_process)[1]
    data = bytearray(chunk.read_bytes())
    data[100] ^= 0x01
    chunk.write_bytes(bytes(data))
    failed = of_type(drain(cli, devices.phone), "file_failed")
    assert [(r["transfer_id"], r["code"]) for r in failed] == [(transfer_id, "chunk_rejected")]
    downloads = downloads_of(cli, "phone")
    assert list(downloads.iterdir()) == []  # no file and no partial file
    assert store_files(relaybox_process) == []


def test_each_device_saves_into_its_own_folder_of_the_users_downloads_unless_told_otherwise(
    cli: Cli, tmp_path: Path
) -> None:
    devices = paired_devices(cli, tmp_path)
    note = tmp_path / "note.txt"
    note.write_text("to and fro")
    send(cli, devices, note)
    ok(cli.run("phone", "send-file", note, "--state", devices.phone))

    [to_phone] = of_type(drain(cli, devices.phone), "file_saved")
    [to_computer] = of_type(drain(cli, devices.computer), "file_saved")
    assert Path(str(to_phone["path"])) == downloads_of(cli, "phone") / "note.txt"
    assert Path(str(to_computer["path"])) == downloads_of(cli, "computer") / "note.txt"
    assert (downloads_of(cli, "computer") / "note.txt").read_text() == "to and fro"

    cli.env["XDG_DOWNLOAD_DIR"] = str(tmp_path / "xdg downloads")
    send(cli, devices, note)
    [elsewhere] = of_type(drain(cli, devices.phone), "file_saved")
    assert Path(str(elsewhere["path"])) == tmp_path / "xdg downloads" / "relaybox-phone" / "note.txt"
    send(cli, devices, note)
    [chosen] = of_type(drain(cli, devices.phone, "--downloads", str(tmp_path / "chosen")), "file_saved")
    assert Path(str(chosen["path"])) == tmp_path / "chosen" / "note.txt"
