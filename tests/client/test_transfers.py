"""The client's file transfer against a live server: a round trip, and a receiver that detects
every way the store (or a lying offer) could corrupt a file — tampered, reordered, duplicated,
truncated and extra chunks — failing cleanly with nothing saved."""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from client import computer, phone
from client.file_receiver import FileReceiver
from client.opener import Opener, Received
from client.output import Output
from client.progress import Progress
from client.state import DeviceState
from client.sync_follower import SyncEvent, SyncFollower
from client.transfers import Offer, TransferError, parse_offer, send_file
from core.domain.chunks import ChunkError
from core.runtime.core import Core

CHUNK = 1000


class ToLiveServer(httpx.HTTPTransport):
    """Presigned URLs name the server's configured base URL; send them to the test's live port."""

    def __init__(self, live: str) -> None:
        super().__init__()
        self._port = httpx.URL(live).port

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.url = request.url.copy_with(port=self._port)
        return super().handle_request(request)


@dataclass
class World:
    phone_path: Path
    computer_path: Path
    store: Path
    transport: ToLiveServer
    stdout: io.StringIO

    @property
    def phone(self) -> DeviceState:
        return DeviceState.load(self.phone_path)

    @property
    def computer(self) -> DeviceState:
        return DeviceState.load(self.computer_path)

    def receiver(self, **options: Any) -> FileReceiver:
        output = Output(as_json=True, stdout=self.stdout, stderr=io.StringIO())
        return FileReceiver(
            self.phone_path,
            self.phone,
            output,
            self.phone_path.parent / "Downloads",
            transport=self.transport,
            **options,
        )

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stdout.getvalue().splitlines()]

    def objects(self) -> list[Path]:
        return sorted(p for p in self.store.rglob("*") if p.is_file()) if self.store.exists() else []


@pytest.fixture
def world(live_server: str, core: Core, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    monkeypatch.setattr("client.transfers.CHUNK_BYTES", CHUNK)
    phone_path, computer_path = tmp_path / "phone" / "phone.json", tmp_path / "computer" / "computer.json"
    phone.register(phone_path, server=live_server)
    started = computer.start_pairing(computer_path, server=live_server, name="laptop")
    assert started.pending is not None
    phone.confirm_pairing(phone_path, started.pending.code)
    computer.wait_for_pairing(computer_path, timeout=10)
    transport = ToLiveServer(live_server)
    yield World(phone_path, computer_path, core.settings.effective_file_store_dir, transport, io.StringIO())
    transport.close()


def offered(world: World, data: bytes) -> Offer:
    """Send ``data`` from the computer; the offer the phone receives on its stream."""
    source = world.computer_path.parent / "notes.bin"
    source.write_bytes(data)
    sent = send_file(world.computer_path, world.computer, source, transport=world.transport)
    state = world.phone
    opener = Opener(world.phone_path, state)
    # It returns at the offer; the idle bound only ends a stream that never brings it (0.5 s was
    # passed once by a loaded CI run in a slow hour, the offer on its way).
    with SyncFollower(state.server, state.device_token, after=0, idle=5.0) as follower:
        for item in follower.events():
            opened = opener.open(item) if isinstance(item, SyncEvent) else None
            if isinstance(opened, Received) and opened.payload.get("transfer_id") == sent.transfer_id:
                return parse_offer(opened.payload)
    raise AssertionError("no offer arrived")


def deliver(world: World, offer: Offer, receiver: FileReceiver | None = None) -> list[dict[str, Any]]:
    item = Received(1, "envelope", world.computer.device_id, "laptop", "file_ctrl", offer.payload())
    assert (receiver or world.receiver()).on_file_ctrl(item) == ""
    return world.records()


def downloads(world: World) -> list[Path]:
    folder = world.phone_path.parent / "Downloads"
    return sorted(folder.iterdir()) if folder.exists() else []


def test_a_file_round_trips_and_its_objects_are_deleted(world: World) -> None:
    data = bytes(range(256)) * 10  # 2560 bytes: three chunks, the last one short
    offer = offered(world, data)
    assert (offer.chunk_count, offer.size, offer.name) == (3, 2560, "notes.bin")
    assert len(world.objects()) == 3
    records = deliver(world, offer)
    assert [r["type"] for r in records] == ["file_saved"]
    assert Path(records[0]["path"]).read_bytes() == data
    assert world.objects() == []


def test_an_empty_file_is_one_empty_final_chunk(world: World) -> None:
    offer = offered(world, b"")
    assert offer.chunk_count == 1
    records = deliver(world, offer)
    assert Path(records[0]["path"]).read_bytes() == b""


def swap(a: Path, b: Path) -> None:
    temporary = a.with_suffix(".swap")
    shutil.move(a, temporary)
    shutil.move(b, a)
    shutil.move(temporary, b)


@pytest.mark.parametrize("corrupt", ["tamper", "reorder", "duplicate"])
def test_a_store_that_alters_chunks_is_detected_and_nothing_is_saved(world: World, corrupt: str) -> None:
    offer = offered(world, b"x" * 3000)  # three full chunks of equal size
    first, second, _third = world.objects()
    if corrupt == "tamper":
        data = bytearray(second.read_bytes())
        data[-1] ^= 0x80  # the tag
        second.write_bytes(bytes(data))
    elif corrupt == "reorder":
        swap(first, second)
    else:
        shutil.copy(first, second)
    records = deliver(world, offer)
    assert [(r["type"], r["code"]) for r in records] == [("file_failed", "chunk_rejected")]
    assert downloads(world) == []  # nothing, not even a partial file
    assert world.objects() == []  # the transfer was ended


def test_an_offer_that_drops_the_final_chunk_is_detected(world: World) -> None:
    offer = offered(world, b"y" * 3000)
    truncated = replace(offer, size=2000, chunk_count=2)
    with pytest.raises(ChunkError):
        world.receiver().receive(world.computer.device_id, truncated)
    assert downloads(world) == []


def test_an_offer_that_claims_an_extra_chunk_fails_cleanly(world: World) -> None:
    offer = offered(world, b"z" * 3000)
    records = deliver(world, replace(offer, size=3500, chunk_count=4))
    assert [(r["type"], r["code"]) for r in records] == [("file_failed", "invalid_chunk_index")]
    assert downloads(world) == []


def test_decline_all_refuses_without_downloading(world: World) -> None:
    offer = offered(world, b"q" * 10)
    records = deliver(world, offer, world.receiver(decline_all=True))
    assert [(r["type"], r["code"]) for r in records] == [("file_declined", "declined")]
    assert world.objects() == []


GOOD = {
    "type": "file_ctrl",
    "action": "offer",
    "transfer_id": "xfr_" + "a" * 32,
    "file_id": "f1",
    "name": "a.bin",
    "size": 2500,
    "chunk_size": 1000,
    "chunk_count": 3,
    "format": "xchacha20poly1305-chunked-v1",
    "nonce_prefix": "AAAAAAAAAAAAAAAAAAAAAA==",
}


@pytest.mark.parametrize(
    "change",
    [
        {"transfer_id": "xfr_../../x"},
        {"file_id": ""},
        {"format": "secretstream"},
        {"size": -1},
        {"size": True},
        {"chunk_count": 2},
        {"chunk_size": 0},
        {"nonce_prefix": "AAAA"},
        {"nonce_prefix": 5},
        {"name": "..."},
        {"name": None},
    ],
)
def test_a_malformed_offer_is_refused(change: dict[str, object]) -> None:
    with pytest.raises(TransferError) as raised:
        parse_offer({**GOOD, **change})
    assert raised.value.code in ("invalid_offer", "unsafe_filename")


def test_an_offered_name_is_made_safe() -> None:
    assert parse_offer({**GOOD, "name": "../../etc/pass\nwd"}).name == "etcpasswd"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_bar_draws_on_a_terminal_only() -> None:
    ticks = iter([0.0, 0.05, 0.2, 0.3])
    shown = Terminal()
    bar = Progress("sending a", 2_000_000, shown, clock=lambda: next(ticks))
    bar.advance(500_000)
    bar.advance(500_000)  # within 0.1 s of the last redraw: not drawn
    bar.advance(1_000_000)
    bar.finish()
    assert shown.getvalue().count("\r") == 2
    assert shown.getvalue().endswith("100%  2.0/2.0 MB\n")
    piped = io.StringIO()
    quiet = Progress("sending a", 10, piped)
    quiet.advance(10)
    quiet.finish()
    assert piped.getvalue() == ""


def test_the_phone_sends_a_file_to_the_computer_too(world: World) -> None:
    source = world.phone_path.parent / "photo.jpg"
    source.write_bytes(b"\xff\xd8" + b"j" * 2500)
    sent = send_file(world.phone_path, world.phone, source, transport=world.transport)
    state = world.computer
    opener = Opener(world.computer_path, state)
    with SyncFollower(state.server, state.device_token, after=0, idle=0.5) as follower:
        offers = [
            opened
            for item in follower.events()
            if isinstance(item, SyncEvent)
            and isinstance(opened := opener.open(item), Received)
            and opened.payload.get("action") == "offer"
        ]
    assert [offer.payload["transfer_id"] for offer in offers] == [sent.transfer_id]
    output = Output(as_json=True, stdout=world.stdout, stderr=io.StringIO())
    folder = world.computer_path.parent / "Downloads"
    receiver = FileReceiver(world.computer_path, state, output, folder, transport=world.transport)
    assert receiver.on_file_ctrl(offers[0]) == ""
    assert (folder / "photo.jpg").read_bytes() == source.read_bytes()
    assert world.objects() == []
