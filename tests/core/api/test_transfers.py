"""The file-transfer broker and the embedded object store: who gets which URLs, what a URL is bound
to (object, method, size, expiry), size cut-offs, quotas, and cleanup on end and expiry."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx2
import pytest
from starlette.testclient import TestClient

from core.adapters.storage.local import LocalObjectStore
from core.clock import ManualClock
from core.principal import Principal
from core.runtime.core import Core
from core.services.maintenance import sweep_expired
from core.services.transfers import end_transfer
from core.settings import Settings, explicit_settings
from tests.helpers import FakeDevice, error_code, pair_computer, register_phone

CHUNK = 1000


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    return explicit_settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        file_quota_bytes=10_000,
        file_max_bytes=8_000,
        file_chunk_max_bytes=4_000,
        file_max_chunks=20,
    )


@pytest.fixture
def store_dir(settings: Settings) -> Path:
    return settings.effective_file_store_dir


class Devices:
    def __init__(self, client: TestClient) -> None:
        self.phone = register_phone(client)
        self.computer = pair_computer(client, self.phone)


@pytest.fixture
def devices(client: TestClient) -> Devices:
    return Devices(client)


def open_transfer(
    client: TestClient, sender: FakeDevice, to: FakeDevice, *, size: int = 2500, chunk_size: int = CHUNK
) -> dict[str, object]:
    response = client.post(
        "/v1/transfers",
        json={"to": to.device_id, "size": size, "chunk_size": chunk_size},
        headers=sender.auth,
    )
    assert response.status_code == 201, response.text
    body: dict[str, object] = response.json()
    return body


def urls(
    client: TestClient, device: FakeDevice, transfer_id: object, kind: str, indexes: list[int]
) -> httpx2.Response:
    return client.post(
        f"/v1/transfers/{transfer_id}/{kind}-urls", json={"indexes": indexes}, headers=device.auth
    )


def one_url(
    client: TestClient, device: FakeDevice, transfer_id: object, kind: str, index: int
) -> dict[str, object]:
    response = urls(client, device, transfer_id, kind, [index])
    assert response.status_code == 200, response.text
    url: dict[str, object] = response.json()["urls"][0]
    return url


def local(url: object) -> str:
    """The path and query of an embedded-store URL (the in-process client has its own origin)."""
    parts = urlsplit(str(url))
    return f"{parts.path}?{parts.query}"


def with_query(url: object, **changes: str) -> str:
    parts = urlsplit(str(url))
    query = {key: values[0] for key, values in parse_qs(parts.query).items()}
    query.update(changes)
    return f"{parts.path}?{urlencode(query)}"


def stored_files(folder: Path) -> list[Path]:
    return sorted(path for path in folder.rglob("*") if path.is_file()) if folder.exists() else []


def test_a_chunk_goes_up_with_the_senders_url_and_down_with_the_recipients(
    client: TestClient, devices: Devices
) -> None:
    transfer = open_transfer(client, devices.computer, devices.phone)
    assert transfer["chunk_count"] == 3
    up = one_url(client, devices.computer, transfer["transfer_id"], "upload", 2)
    assert (up["method"], up["size"]) == ("PUT", 500)  # the last chunk holds the remainder
    assert client.put(local(up["url"]), content=b"c" * 500).status_code == 200

    down = one_url(client, devices.phone, transfer["transfer_id"], "download", 2)
    assert down["method"] == "GET"
    got = client.get(local(down["url"]))
    assert got.status_code == 200
    assert got.content == b"c" * 500
    assert got.headers["cache-control"] == "no-store"


def test_only_the_two_devices_of_a_transfer_get_its_urls_each_their_own_kind(
    client: TestClient, devices: Devices
) -> None:
    transfer_id = open_transfer(client, devices.computer, devices.phone)["transfer_id"]
    stranger = register_phone(client, name="someone else")
    other_computer = pair_computer(client, devices.phone, name="desktop")
    for device in (stranger, other_computer):
        for kind in ("upload", "download"):
            assert error_code(urls(client, device, transfer_id, kind, [0])) == "not_found"
        assert client.get(f"/v1/transfers/{transfer_id}", headers=device.auth).status_code == 404
    assert error_code(urls(client, devices.phone, transfer_id, "upload", [0])) == "not_found"
    assert error_code(urls(client, devices.computer, transfer_id, "download", [0])) == "not_found"


def test_a_transfer_goes_only_to_a_paired_device(client: TestClient, devices: Devices) -> None:
    stranger = register_phone(client, name="someone else")
    response = client.post(
        "/v1/transfers",
        json={"to": stranger.device_id, "size": 100, "chunk_size": CHUNK},
        headers=devices.computer.auth,
    )
    assert (response.status_code, error_code(response)) == (404, "not_found")


@pytest.mark.parametrize(
    ("size", "chunk_size", "status", "code"),
    [
        (8_001, CHUNK, 413, "transfer_too_large"),
        (8_000, 4_001, 400, "invalid_chunk_layout"),
        (8_000, 300, 400, "invalid_chunk_layout"),  # 27 chunks, 20 allowed
        (1_010, CHUNK, 400, "invalid_chunk_layout"),  # a 10-byte last chunk cannot hold a tag
        (15, CHUNK, 400, "invalid_body"),
    ],
)
def test_chunk_layouts_beyond_the_limits_are_refused(
    client: TestClient, devices: Devices, size: int, chunk_size: int, status: int, code: str
) -> None:
    response = client.post(
        "/v1/transfers",
        json={"to": devices.phone.device_id, "size": size, "chunk_size": chunk_size},
        headers=devices.computer.auth,
    )
    assert (response.status_code, error_code(response)) == (status, code)


def test_indexes_outside_the_transfer_are_refused(client: TestClient, devices: Devices) -> None:
    transfer_id = open_transfer(client, devices.computer, devices.phone)["transfer_id"]
    response = urls(client, devices.computer, transfer_id, "upload", [0, 3])
    assert (response.status_code, error_code(response)) == (400, "invalid_chunk_index")
    assert (
        error_code(urls(client, devices.computer, transfer_id, "upload", list(range(101)))) == "invalid_body"
    )


def test_the_quota_counts_open_transfers_of_the_account_and_frees_when_one_ends(
    client: TestClient, devices: Devices
) -> None:
    first = open_transfer(client, devices.computer, devices.phone, size=6_000)
    response = client.post(
        "/v1/transfers",
        json={"to": devices.computer.device_id, "size": 5_000, "chunk_size": CHUNK},
        headers=devices.phone.auth,
    )
    assert (response.status_code, error_code(response)) == (409, "storage_quota_exceeded")
    assert response.json()["error"]["details"] == {"used": 6_000, "quota": 10_000}
    ended = client.delete(f"/v1/transfers/{first['transfer_id']}", headers=devices.phone.auth)
    assert ended.status_code == 204
    open_transfer(client, devices.phone, devices.computer, size=5_000)


@pytest.mark.parametrize(
    "tamper",
    [
        {"signature": "A" * 43},  # forged
        {"size": "499"},  # another size
        {"expires": "9999999999"},  # a longer life
        {"signature": ""},
    ],
)
def test_an_altered_url_is_refused_with_403(
    client: TestClient, devices: Devices, tamper: dict[str, str]
) -> None:
    transfer_id = open_transfer(client, devices.computer, devices.phone)["transfer_id"]
    up = one_url(client, devices.computer, transfer_id, "upload", 2)
    response = client.put(with_query(up["url"], **tamper), content=b"c" * 500)
    assert (response.status_code, error_code(response)) == (403, "invalid_signature")


def test_a_url_is_bound_to_its_object_and_method(
    client: TestClient, devices: Devices, store_dir: Path
) -> None:
    transfer_id = open_transfer(client, devices.computer, devices.phone)["transfer_id"]
    up = one_url(client, devices.computer, transfer_id, "upload", 0)
    moved = local(up["url"]).replace(f"{transfer_id}/0", f"{transfer_id}/1")
    assert error_code(client.put(moved, content=b"x" * CHUNK)) == "invalid_signature"
    assert error_code(client.get(local(up["url"]))) == "invalid_signature"  # a PUT URL does not read
    other = open_transfer(client, devices.computer, devices.phone)["transfer_id"]
    elsewhere = local(up["url"]).replace(str(transfer_id), str(other))
    assert error_code(client.put(elsewhere, content=b"x" * CHUNK)) == "invalid_signature"
    assert stored_files(store_dir) == []


def test_an_expired_url_is_refused_with_403(
    client: TestClient, devices: Devices, clock: ManualClock, settings: Settings
) -> None:
    transfer_id = open_transfer(client, devices.computer, devices.phone)["transfer_id"]
    up = one_url(client, devices.computer, transfer_id, "upload", 0)
    clock.advance(settings.file_url_ttl_s)
    response = client.put(local(up["url"]), content=b"x" * CHUNK)
    assert (response.status_code, error_code(response)) == (403, "invalid_signature")


def test_an_oversize_upload_is_cut_off_and_nothing_is_kept(
    client: TestClient, devices: Devices, store_dir: Path
) -> None:
    transfer_id = open_transfer(client, devices.computer, devices.phone)["transfer_id"]
    up = one_url(client, devices.computer, transfer_id, "upload", 0)
    declared = client.put(local(up["url"]), content=b"x" * (CHUNK + 1))
    assert (declared.status_code, error_code(declared)) == (413, "upload_too_large")

    def endless() -> Iterator[bytes]:  # no Content-Length: the server must stop reading by itself
        for _ in range(10_000):
            yield b"y" * 100

    streamed = client.put(local(up["url"]), content=endless())
    assert (streamed.status_code, error_code(streamed)) == (413, "upload_too_large")
    short = client.put(local(up["url"]), content=b"x" * (CHUNK - 1))
    assert (short.status_code, error_code(short)) == (400, "upload_size_mismatch")
    assert stored_files(store_dir) == []  # no object and no temporary file left


def test_a_missing_chunk_is_404_and_a_retried_upload_replaces_the_object(
    client: TestClient, devices: Devices
) -> None:
    transfer_id = open_transfer(client, devices.computer, devices.phone)["transfer_id"]
    down = one_url(client, devices.phone, transfer_id, "download", 0)
    assert error_code(client.get(local(down["url"]))) == "not_found"
    up = one_url(client, devices.computer, transfer_id, "upload", 0)
    assert client.put(local(up["url"]), content=b"1" * CHUNK).status_code == 200
    assert client.put(local(up["url"]), content=b"2" * CHUNK).status_code == 200
    assert client.get(local(down["url"])).content == b"2" * CHUNK


def test_ending_a_transfer_deletes_its_objects_and_its_urls_stop_working(
    client: TestClient, devices: Devices, store_dir: Path
) -> None:
    transfer_id = open_transfer(client, devices.computer, devices.phone)["transfer_id"]
    up = one_url(client, devices.computer, transfer_id, "upload", 0)
    down = one_url(client, devices.phone, transfer_id, "download", 0)
    assert client.put(local(up["url"]), content=b"x" * CHUNK).status_code == 200
    assert stored_files(store_dir) != []

    assert client.delete(f"/v1/transfers/{transfer_id}", headers=devices.computer.auth).status_code == 204
    assert stored_files(store_dir) == []
    assert error_code(client.get(local(down["url"]))) == "not_found"
    assert error_code(client.put(local(up["url"]), content=b"x" * CHUNK)) == "not_found"  # no orphan
    assert stored_files(store_dir) == []
    assert client.delete(f"/v1/transfers/{transfer_id}", headers=devices.phone.auth).status_code == 404


def test_a_stranger_cannot_end_a_transfer(client: TestClient, devices: Devices) -> None:
    transfer_id = open_transfer(client, devices.computer, devices.phone)["transfer_id"]
    stranger = register_phone(client, name="someone else")
    assert client.delete(f"/v1/transfers/{transfer_id}", headers=stranger.auth).status_code == 404
    assert client.get(f"/v1/transfers/{transfer_id}", headers=devices.phone.auth).status_code == 200


def test_expired_transfers_are_swept_with_their_objects(
    client: TestClient, devices: Devices, core: Core, clock: ManualClock, settings: Settings, store_dir: Path
) -> None:
    transfer_id = open_transfer(client, devices.computer, devices.phone)["transfer_id"]
    up = one_url(client, devices.computer, transfer_id, "upload", 0)
    assert client.put(local(up["url"]), content=b"x" * CHUNK).status_code == 200
    clock.advance(settings.file_transfer_ttl_s)
    assert client.get(f"/v1/transfers/{transfer_id}", headers=devices.phone.auth).status_code == 404
    swept = client.portal.call(core.run, sweep_expired, Principal.system())  # type: ignore[union-attr]
    assert swept.removed["file_transfers"] == 1
    assert stored_files(store_dir) == []


def test_an_upload_that_finishes_after_its_transfer_ended_leaves_nothing(
    client: TestClient, devices: Devices, core: Core, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    transfer_id = str(open_transfer(client, devices.computer, devices.phone)["transfer_id"])
    up = one_url(client, devices.computer, transfer_id, "upload", 0)
    write = LocalObjectStore.write
    sender = Principal.device(
        account_id=devices.phone.account_id, device_id=devices.computer.device_id, surface_kind="cli"
    )

    async def write_then_end(self: LocalObjectStore, key: str, size: int, body: AsyncIterator[bytes]) -> None:
        await write(self, key, size, body)
        core.run_sync(end_transfer, sender, transfer_id=transfer_id)  # the phone declined meanwhile

    monkeypatch.setattr(LocalObjectStore, "write", write_then_end)
    response = client.put(local(up["url"]), content=b"x" * CHUNK)
    assert (response.status_code, error_code(response)) == (404, "not_found")
    assert stored_files(store_dir) == []
