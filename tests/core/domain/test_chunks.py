from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from core.domain.chunks import (
    CHUNK_FORMAT,
    MAX_INDEX,
    ChunkCipher,
    ChunkError,
    associated_data,
    chunk_nonce,
    derive_chunk_key,
    hkdf_sha256,
    new_nonce_prefix,
)
from core.domain.keys import generate_keypair

VECTORS: dict[str, Any] = json.loads(
    (Path(__file__).resolve().parents[3] / "vectors" / "chunks.json").read_text(encoding="utf-8")
)
TRANSFER: dict[str, Any] = VECTORS["transfers"][0]
FILES: list[dict[str, Any]] = TRANSFER["files"]
CHUNKS: list[tuple[str, dict[str, Any]]] = [(f["file_id"], c) for f in FILES for c in f["chunks"]]
NEGATIVES: list[dict[str, Any]] = VECTORS["negative"]
KEY = bytes.fromhex(TRANSFER["key"])
PREFIX = bytes.fromhex(TRANSFER["nonce_prefix"])
TRANSFER_ID: str = TRANSFER["transfer_id"]


def vector_cipher(file_id: str) -> ChunkCipher:
    return ChunkCipher(KEY, PREFIX, TRANSFER_ID, file_id)


def fresh_cipher(file_id: str = "f") -> ChunkCipher:
    return ChunkCipher(bytes(range(32)), new_nonce_prefix(), "tr_test", file_id)


def test_the_wire_identifier_is_the_one_in_the_spec_and_the_vectors() -> None:
    assert CHUNK_FORMAT == VECTORS["format"] == "xchacha20poly1305-chunked-v1"


@pytest.mark.parametrize("case", VECTORS["key_derivation"], ids=["computer-side", "phone-side"])
def test_derive_chunk_key_gives_the_vector_key_on_each_side(case: dict[str, Any]) -> None:
    key = derive_chunk_key(
        bytes.fromhex(case["my_secret"]), bytes.fromhex(case["their_public"]), case["transfer_id"]
    )
    assert key.hex() == case["key"]
    info = CHUNK_FORMAT.encode()
    expected = hkdf_sha256(
        bytes.fromhex(case["shared_secret"]), salt=case["transfer_id"].encode(), info=info, length=32
    )
    assert key == expected


@pytest.mark.parametrize(("file_id", "chunk"), CHUNKS, ids=[f"{f}#{c['index']}" for f, c in CHUNKS])
def test_seal_gives_the_exact_vector_ciphertext(file_id: str, chunk: dict[str, Any]) -> None:
    sealed = vector_cipher(file_id).seal(
        chunk["index"], bytes.fromhex(chunk["plaintext"]), is_final=chunk["is_final"]
    )
    assert sealed.hex() == chunk["ciphertext"]


@pytest.mark.parametrize(("file_id", "chunk"), CHUNKS, ids=[f"{f}#{c['index']}" for f, c in CHUNKS])
def test_open_of_the_vector_ciphertext_gives_the_vector_plaintext(
    file_id: str, chunk: dict[str, Any]
) -> None:
    opened = vector_cipher(file_id).open(
        chunk["index"], bytes.fromhex(chunk["ciphertext"]), is_final=chunk["is_final"]
    )
    assert opened.hex() == chunk["plaintext"]


@pytest.mark.parametrize(("file_id", "chunk"), CHUNKS, ids=[f"{f}#{c['index']}" for f, c in CHUNKS])
def test_vector_nonce_and_associated_data_follow_the_documented_layout(
    file_id: str, chunk: dict[str, Any]
) -> None:
    index, is_final = chunk["index"], chunk["is_final"]
    assert chunk_nonce(PREFIX, index).hex() == chunk["nonce"]
    assert chunk["nonce"] == PREFIX.hex() + index.to_bytes(8, "big").hex()
    transfer, file = TRANSFER_ID.encode(), file_id.encode()
    layout = (
        CHUNK_FORMAT.encode("ascii")
        + len(transfer).to_bytes(2, "big")
        + transfer
        + len(file).to_bytes(2, "big")
        + file
        + index.to_bytes(8, "big")
        + bytes([is_final])
    )
    assert (
        associated_data(TRANSFER_ID, file_id, index, is_final=is_final).hex()
        == chunk["associated_data"]
        == layout.hex()
    )


@pytest.mark.parametrize("file", FILES, ids=[f["file_id"] for f in FILES])
def test_seal_file_and_open_file_reproduce_the_vector_files(file: dict[str, Any]) -> None:
    cipher = vector_cipher(file["file_id"])
    data = bytes.fromhex(file["plaintext"])
    sealed = cipher.seal_file(data, first_index=file["first_index"], chunk_size=file["chunk_size"])
    assert [c.hex() for c in sealed] == [c["ciphertext"] for c in file["chunks"]]
    assert cipher.open_file(sealed, first_index=file["first_index"]) == data


@pytest.mark.parametrize("case", NEGATIVES, ids=[case["name"] for case in NEGATIVES])
def test_open_rejects_each_negative_vector_with_a_chunk_error(case: dict[str, Any]) -> None:
    assert case["error"] == "ChunkError"
    cipher = ChunkCipher(
        bytes.fromhex(case["key"]), bytes.fromhex(case["nonce_prefix"]), case["transfer_id"], case["file_id"]
    )
    with pytest.raises(ChunkError):
        cipher.open(case["index"], bytes.fromhex(case["ciphertext"]), is_final=case["is_final"])


def test_both_devices_derive_the_same_key_and_another_transfer_gets_another() -> None:
    alice_secret, alice_public = generate_keypair()
    bob_secret, bob_public = generate_keypair()
    key = derive_chunk_key(alice_secret, bob_public, "tr_1")
    assert derive_chunk_key(bob_secret, alice_public, "tr_1") == key
    assert derive_chunk_key(alice_secret, bob_public, "tr_2") != key
    assert len(key) == 32


def test_a_file_round_trips_across_many_chunks() -> None:
    cipher = fresh_cipher()
    data = bytes(range(256)) * 10
    sealed = cipher.seal_file(data, first_index=7, chunk_size=100)
    assert len(sealed) == 26
    assert all(len(c) == 116 for c in sealed[:-1])
    assert cipher.open_file(sealed, first_index=7) == data


def test_an_empty_file_is_one_empty_final_chunk() -> None:
    cipher = fresh_cipher()
    sealed = cipher.seal_file(b"", first_index=0, chunk_size=16)
    assert len(sealed) == 1
    assert len(sealed[0]) == 16
    assert cipher.open(0, sealed[0], is_final=True) == b""


def test_open_file_rejects_reordered_chunks() -> None:
    cipher = fresh_cipher()
    sealed = cipher.seal_file(b"a" * 48, first_index=0, chunk_size=16)
    with pytest.raises(ChunkError):
        cipher.open_file([sealed[1], sealed[0], sealed[2]], first_index=0)


def test_open_file_rejects_a_tampered_chunk() -> None:
    cipher = fresh_cipher()
    sealed = cipher.seal_file(b"a" * 48, first_index=0, chunk_size=16)
    sealed[1] = bytes([sealed[1][0] ^ 0x01]) + sealed[1][1:]
    with pytest.raises(ChunkError):
        cipher.open_file(sealed, first_index=0)


def test_open_file_rejects_a_file_missing_its_final_chunk() -> None:
    cipher = fresh_cipher()
    sealed = cipher.seal_file(b"a" * 48, first_index=0, chunk_size=16)
    with pytest.raises(ChunkError):
        cipher.open_file(sealed[:-1], first_index=0)


def test_open_file_rejects_an_extra_chunk_after_the_final_one() -> None:
    cipher = fresh_cipher()
    sealed = cipher.seal_file(b"a" * 48, first_index=0, chunk_size=16)
    extra = cipher.seal(3, b"more", is_final=True)
    with pytest.raises(ChunkError):
        cipher.open_file([*sealed, extra], first_index=0)
    with pytest.raises(ChunkError):
        cipher.open_file([*sealed, sealed[-1]], first_index=0)


def test_open_file_rejects_no_chunks_at_all() -> None:
    with pytest.raises(ChunkError):
        fresh_cipher().open_file([], first_index=0)


def test_open_rejects_the_wrong_finality() -> None:
    cipher = fresh_cipher()
    middle = cipher.seal(0, b"middle", is_final=False)
    last = cipher.seal(1, b"last", is_final=True)
    with pytest.raises(ChunkError):
        cipher.open(0, middle, is_final=True)
    with pytest.raises(ChunkError):
        cipher.open(1, last, is_final=False)


def test_open_rejects_a_chunk_from_another_file_transfer_prefix_or_key() -> None:
    key, prefix = bytes(range(32)), new_nonce_prefix()
    sealed = ChunkCipher(key, prefix, "tr_a", "file-a").seal(0, b"data", is_final=True)
    others = [
        ChunkCipher(key, prefix, "tr_a", "file-b"),
        ChunkCipher(key, prefix, "tr_b", "file-a"),
        ChunkCipher(key, bytes(16) if prefix != bytes(16) else b"\x01" * 16, "tr_a", "file-a"),
        ChunkCipher(bytes(32), prefix, "tr_a", "file-a"),
    ]
    for other in others:
        with pytest.raises(ChunkError):
            other.open(0, sealed, is_final=True)


def test_open_rejects_truncated_ciphertext() -> None:
    cipher = fresh_cipher()
    sealed = cipher.seal(0, b"some bytes", is_final=True)
    for length in (0, 1, 15, 16, len(sealed) - 1):
        with pytest.raises(ChunkError):
            cipher.open(0, sealed[:length], is_final=True)


def test_open_rejects_ciphertext_that_is_not_bytes() -> None:
    with pytest.raises(ChunkError):
        fresh_cipher().open(0, "00" * 20, is_final=True)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "index", [-1, MAX_INDEX + 1, True, 1.0], ids=["negative", "too-big", "bool", "float"]
)
def test_seal_and_open_reject_an_index_outside_0_to_2_64_minus_1(index: Any) -> None:
    cipher = fresh_cipher()
    with pytest.raises(ChunkError):
        cipher.seal(index, b"x", is_final=False)
    with pytest.raises(ChunkError):
        cipher.open(index, bytes(17), is_final=False)


def test_the_largest_index_is_usable() -> None:
    cipher = fresh_cipher()
    sealed = cipher.seal(MAX_INDEX, b"edge", is_final=True)
    assert cipher.open(MAX_INDEX, sealed, is_final=True) == b"edge"
    assert chunk_nonce(bytes(16), MAX_INDEX) == bytes(16) + b"\xff" * 8


def test_seal_file_rejects_a_file_that_would_run_past_the_largest_index() -> None:
    with pytest.raises(ChunkError):
        fresh_cipher().seal_file(b"ab", first_index=MAX_INDEX, chunk_size=1)


def test_seal_file_rejects_a_chunk_size_below_one() -> None:
    with pytest.raises(ChunkError):
        fresh_cipher().seal_file(b"ab", first_index=0, chunk_size=0)


def test_is_final_must_be_a_bool() -> None:
    with pytest.raises(ChunkError):
        fresh_cipher().seal(0, b"x", is_final=1)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("key", "prefix", "transfer_id", "file_id"),
    [
        (bytes(31), bytes(16), "t", "f"),
        (bytes(33), bytes(16), "t", "f"),
        (bytes(32), bytes(15), "t", "f"),
        (bytes(32), bytes(24), "t", "f"),
        (bytes(32), bytes(16), "", "f"),
        (bytes(32), bytes(16), "t", ""),
        (bytes(32), bytes(16), "t" * 65536, "f"),
        (bytes(32), bytes(16), "t", "\ud800"),
    ],
    ids=[
        "key-31",
        "key-33",
        "prefix-15",
        "prefix-24",
        "empty-transfer",
        "empty-file",
        "long-transfer",
        "surrogate",
    ],
)
def test_chunk_cipher_rejects_bad_keys_prefixes_and_ids(
    key: bytes, prefix: bytes, transfer_id: str, file_id: str
) -> None:
    with pytest.raises(ChunkError):
        ChunkCipher(key, prefix, transfer_id, file_id)


def test_derive_chunk_key_rejects_bad_keys_and_transfer_ids() -> None:
    secret, public = generate_keypair()
    with pytest.raises(ChunkError):
        derive_chunk_key(secret[:31], public, "tr")
    with pytest.raises(ChunkError):
        derive_chunk_key(secret, public + b"\x00", "tr")
    with pytest.raises(ChunkError):
        derive_chunk_key(secret, public, "")
    with pytest.raises(ChunkError):
        derive_chunk_key(secret, bytes(32), "tr")  # low-order point: all-zero shared secret


def test_new_nonce_prefix_is_16_fresh_random_bytes() -> None:
    prefixes = {new_nonce_prefix() for _ in range(20)}
    assert len(prefixes) == 20
    assert all(len(p) == 16 for p in prefixes)


def test_chunk_error_is_a_value_error() -> None:
    assert issubclass(ChunkError, ValueError)


RFC_5869_CASES = [
    (  # test case 1
        "0b" * 22,
        "000102030405060708090a0b0c",
        "f0f1f2f3f4f5f6f7f8f9",
        42,
        "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865",
    ),
    (  # test case 2
        bytes(range(0x00, 0x50)).hex(),
        bytes(range(0x60, 0xB0)).hex(),
        bytes(range(0xB0, 0x100)).hex(),
        82,
        "b11e398dc80327a1c8e7f78c596a49344f012eda2d4efad8a050cc4c19afa97c59045a99cac7827271cb41c65e590e09"
        "da3275600c2f09b8367793a9aca3db71cc30c58179ec3e87c14c01d5c1f3434f1d87",
    ),
    (  # test case 3: empty salt and info
        "0b" * 22,
        "",
        "",
        42,
        "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8",
    ),
]


@pytest.mark.parametrize(
    ("ikm", "salt", "info", "length", "okm"), RFC_5869_CASES, ids=["case-1", "case-2", "case-3"]
)
def test_hkdf_sha256_matches_the_rfc_5869_test_vectors(
    ikm: str, salt: str, info: str, length: int, okm: str
) -> None:
    derived = hkdf_sha256(
        bytes.fromhex(ikm), salt=bytes.fromhex(salt), info=bytes.fromhex(info), length=length
    )
    assert derived.hex() == okm


@pytest.mark.parametrize("length", [0, 255 * 32 + 1])
def test_hkdf_sha256_rejects_an_impossible_output_length(length: int) -> None:
    with pytest.raises(ValueError, match="length"):
        hkdf_sha256(b"ikm", salt=b"", info=b"", length=length)
