"""The embedded object store on its own: signatures, and an upload that stops being read at its size."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from core.adapters.storage.local import LocalObjectStore, ObjectIncompleteError, ObjectTooLargeError

KEY = "xfr_" + "0" * 32 + "/0"


@pytest.fixture
def store(tmp_path: Path) -> LocalObjectStore:
    return LocalObjectStore(tmp_path / "objects", b"k" * 32, "http://relay.test")


def query_of(url: str) -> dict[str, str]:
    from urllib.parse import parse_qs, urlsplit

    return {key: values[0] for key, values in parse_qs(urlsplit(url).query).items()}


def test_a_signature_verifies_only_for_its_method_key_size_and_time(store: LocalObjectStore) -> None:
    url = store.upload_url(KEY, size=10, now=0, expires_at=1000)
    assert url.startswith(f"http://relay.test/v1/objects/{KEY}?")
    q = query_of(url)
    assert store.verify("PUT", KEY, q["size"], q["expires"], q["signature"], now=999) == 10
    for method, key, size, expires, now in [
        ("GET", KEY, q["size"], q["expires"], 999),
        ("PUT", KEY[:-1] + "1", q["size"], q["expires"], 999),
        ("PUT", KEY, "11", q["expires"], 999),
        ("PUT", KEY, q["size"], "1001", 999),
        ("PUT", KEY, q["size"], q["expires"], 1000),
    ]:
        with pytest.raises(PermissionError):
            store.verify(method, key, size, expires, q["signature"], now=now)
    other = LocalObjectStore(store.root, b"o" * 32, "http://relay.test")
    with pytest.raises(PermissionError):
        other.verify("PUT", KEY, q["size"], q["expires"], q["signature"], now=999)


@pytest.mark.parametrize(
    "key", ["../x/0", "xfr_" + "0" * 32 + "/-1", "xfr_" + "0" * 32 + "/../../etc", "x/0"]
)
def test_object_keys_outside_the_layout_have_no_path(store: LocalObjectStore, key: str) -> None:
    with pytest.raises(ValueError, match="not an"):
        store.path_of(key)


def test_an_upload_stops_being_read_once_it_passes_its_size(store: LocalObjectStore) -> None:
    read = 0

    async def endless() -> AsyncIterator[bytes]:
        nonlocal read
        while True:
            read += 1
            yield b"z" * 1000

    async def main() -> None:
        with pytest.raises(ObjectTooLargeError):
            await store.write(KEY, 4500, endless())

    anyio.run(main)
    assert read == 5
    assert [p for p in store.root.rglob("*") if p.is_file()] == []


def test_a_short_upload_leaves_nothing_and_a_whole_one_appears_at_once(store: LocalObjectStore) -> None:
    async def body(data: bytes) -> AsyncIterator[bytes]:
        yield data

    async def main() -> None:
        with pytest.raises(ObjectIncompleteError):
            await store.write(KEY, 10, body(b"123"))
        assert [p for p in store.root.rglob("*") if p.is_file()] == []
        await store.write(KEY, 3, body(b"123"))

    anyio.run(main)
    assert store.path_of(KEY).read_bytes() == b"123"
    store.delete_transfer(KEY.partition("/")[0])
    assert not store.path_of(KEY).exists()
