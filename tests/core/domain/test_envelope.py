from __future__ import annotations

import json
import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from nacl.public import Box, PrivateKey, PublicKey

from core.domain import envelope
from core.domain.canonical import canonical_json
from core.domain.envelope import (
    MIN_LENGTH,
    NONCE_LENGTH,
    WIRE_VERSION,
    BoxCache,
    EnvelopeError,
    EnvelopeOpenFailed,
    EnvelopeTooShort,
    PairBox,
    UnsupportedWireVersion,
    open_envelope,
    seal,
)
from core.domain.keys import InvalidPublicKey, generate_keypair

VECTORS: dict[str, Any] = json.loads(
    (Path(__file__).resolve().parents[3] / "vectors" / "envelope.json").read_text(encoding="utf-8")
)
CASES: list[dict[str, Any]] = VECTORS["cases"]
NEGATIVES: list[dict[str, Any]] = VECTORS["negative"]


def ids(cases: list[dict[str, Any]]) -> list[str]:
    return [case["name"] for case in cases]


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_seal_with_the_vector_nonce_gives_the_exact_vector_bytes(case: dict[str, Any]) -> None:
    sealed = seal(
        bytes.fromhex(case["plaintext"]),
        bytes.fromhex(case["sender_secret"]),
        bytes.fromhex(case["recipient_public"]),
        nonce=bytes.fromhex(case["nonce"]),
    )
    assert sealed.hex() == case["envelope"]


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_open_of_the_vector_bytes_gives_the_vector_plaintext(case: dict[str, Any]) -> None:
    opened = open_envelope(
        bytes.fromhex(case["envelope"]),
        bytes.fromhex(case["recipient_secret"]),
        bytes.fromhex(case["sender_public"]),
    )
    assert opened.hex() == case["plaintext"]


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_vector_envelopes_are_a_version_byte_before_a_plain_nacl_box(case: dict[str, Any]) -> None:
    blob = bytes.fromhex(case["envelope"])
    box = Box(
        PrivateKey(bytes.fromhex(case["recipient_secret"])), PublicKey(bytes.fromhex(case["sender_public"]))
    )
    assert blob[0] == WIRE_VERSION
    assert blob[1 : 1 + NONCE_LENGTH].hex() == case["nonce"]
    assert box.decrypt(blob[1:]).hex() == case["plaintext"]


@pytest.mark.parametrize("case", NEGATIVES, ids=ids(NEGATIVES))
def test_open_rejects_each_negative_vector_with_its_named_error(case: dict[str, Any]) -> None:
    expected = getattr(envelope, case["error"])
    with pytest.raises(expected) as caught:
        open_envelope(
            bytes.fromhex(case["envelope"]),
            bytes.fromhex(case["recipient_secret"]),
            bytes.fromhex(case["sender_public"]),
        )
    assert type(caught.value) is expected


def test_seal_then_open_round_trips_between_two_fresh_key_pairs() -> None:
    alice_secret, alice_public = generate_keypair()
    bob_secret, bob_public = generate_keypair()
    blob = seal(b"round trip", alice_secret, bob_public)
    assert open_envelope(blob, bob_secret, alice_public) == b"round trip"
    assert PairBox(alice_secret, bob_public).open(PairBox(bob_secret, alice_public).seal(b"back")) == b"back"


def test_seal_uses_a_fresh_nonce_for_every_message() -> None:
    secret, _ = generate_keypair()
    _, public = generate_keypair()
    box = PairBox(secret, public)
    blobs = [box.seal(b"same") for _ in range(20)]
    assert len({blob[1 : 1 + NONCE_LENGTH] for blob in blobs}) == 20


def test_an_empty_plaintext_seals_to_exactly_the_minimum_length() -> None:
    secret, public = generate_keypair()
    blob = PairBox(secret, public).seal(b"")
    assert len(blob) == MIN_LENGTH == 41
    assert PairBox(secret, public).open(blob) == b""


def test_open_rejects_a_version_byte_other_than_0x01() -> None:
    secret, public = generate_keypair()
    box = PairBox(secret, public)
    blob = box.seal(b"payload")
    for version in (0x00, 0x02, 0xFF):
        with pytest.raises(UnsupportedWireVersion) as caught:
            box.open(bytes([version]) + blob[1:])
        assert str(caught.value) == "Unsupported wire version"


def test_open_rejects_blobs_shorter_than_41_bytes_before_decrypting() -> None:
    secret, public = generate_keypair()
    box = PairBox(secret, public)
    for length in (0, 1, 25, 40):
        with pytest.raises(EnvelopeTooShort):
            box.open(b"\x01" * length)


def test_open_rejects_an_envelope_sealed_for_someone_else() -> None:
    alice_secret, alice_public = generate_keypair()
    _, bob_public = generate_keypair()
    eve_secret, _ = generate_keypair()
    blob = seal(b"secret", alice_secret, bob_public)
    with pytest.raises(EnvelopeOpenFailed):
        open_envelope(blob, eve_secret, alice_public)


def test_open_rejects_any_single_flipped_bit() -> None:
    secret, public = generate_keypair()
    box = PairBox(secret, public)
    blob = box.seal(b"integrity")
    for position in range(1, len(blob)):
        altered = blob[:position] + bytes([blob[position] ^ 0x04]) + blob[position + 1 :]
        with pytest.raises(EnvelopeOpenFailed):
            box.open(altered)


def test_open_raises_only_envelope_errors_for_arbitrary_bytes() -> None:
    secret, public = generate_keypair()
    box = PairBox(secret, public)
    rng = random.Random(1234)
    for _ in range(500):
        length = rng.randrange(0, 120)
        blob = bytes(rng.randrange(256) for _ in range(length))
        if rng.random() < 0.5 and blob:
            blob = b"\x01" + blob[1:]
        with pytest.raises(EnvelopeError):
            box.open(blob)


@pytest.mark.parametrize("blob", [None, "01" * 41, 41, [1] * 41], ids=["none", "str", "int", "list"])
def test_open_rejects_input_that_is_not_bytes_with_an_envelope_error(blob: Any) -> None:
    secret, public = generate_keypair()
    with pytest.raises(EnvelopeError):
        PairBox(secret, public).open(blob)


def test_open_accepts_bytearray_and_memoryview() -> None:
    secret, public = generate_keypair()
    box = PairBox(secret, public)
    blob = box.seal(b"buffer")
    assert box.open(bytearray(blob)) == b"buffer"  # type: ignore[arg-type]
    assert box.open(memoryview(blob)) == b"buffer"  # type: ignore[arg-type]


def test_envelope_errors_are_value_errors() -> None:
    for error in (EnvelopeTooShort, UnsupportedWireVersion, EnvelopeOpenFailed):
        assert issubclass(error, EnvelopeError)
    assert issubclass(EnvelopeError, ValueError)


def test_seal_rejects_a_nonce_that_is_not_24_bytes() -> None:
    secret, public = generate_keypair()
    box = PairBox(secret, public)
    for nonce in (b"", b"\x00" * 23, b"\x00" * 25):
        with pytest.raises(ValueError, match="nonce"):
            box.seal(b"x", nonce)


def test_seal_rejects_a_plaintext_that_is_not_bytes() -> None:
    secret, public = generate_keypair()
    with pytest.raises(TypeError):
        PairBox(secret, public).seal("text")  # type: ignore[arg-type]


def test_pair_box_rejects_keys_that_are_not_32_bytes() -> None:
    secret, public = generate_keypair()
    with pytest.raises(ValueError, match="secret"):
        PairBox(secret[:31], public)
    with pytest.raises(InvalidPublicKey):
        PairBox(secret, public + b"\x00")


def test_pair_box_rejects_a_low_order_public_key() -> None:
    secret, _ = generate_keypair()
    with pytest.raises(InvalidPublicKey):
        PairBox(secret, bytes(32))


def test_box_cache_returns_the_same_pair_box_for_the_same_keys() -> None:
    secret, public = generate_keypair()
    cache = BoxCache()
    first = cache.get(secret, public)
    assert cache.get(secret, public) is first
    assert len(cache) == 1


def test_box_cache_evicts_the_least_recently_used_pair_beyond_its_bound() -> None:
    secret, _ = generate_keypair()
    publics = [generate_keypair()[1] for _ in range(3)]
    cache = BoxCache(max_entries=2)
    first = cache.get(secret, publics[0])
    cache.get(secret, publics[1])
    assert cache.get(secret, publics[0]) is first  # now most recently used
    cache.get(secret, publics[2])  # evicts publics[1]
    assert len(cache) == 2
    assert cache.get(secret, publics[0]) is first
    second_again = cache.get(secret, publics[1])
    assert len(cache) == 2
    assert cache.get(secret, publics[1]) is second_again


def test_box_cache_gives_every_thread_one_shared_pair_box() -> None:
    secret, public = generate_keypair()
    cache = BoxCache()
    with ThreadPoolExecutor(max_workers=8) as pool:
        boxes = list(pool.map(lambda _: cache.get(secret, public), range(64)))
    assert len({id(box) for box in boxes}) == 1
    assert len(cache) == 1


def test_box_cache_rejects_a_bound_below_one() -> None:
    with pytest.raises(ValueError, match="max_entries"):
        BoxCache(max_entries=0)


def test_a_cached_pair_box_opens_what_the_peer_sealed() -> None:
    alice_secret, alice_public = generate_keypair()
    bob_secret, bob_public = generate_keypair()
    cache = BoxCache()
    blob = cache.get(alice_secret, bob_public).seal(b"via cache")
    assert cache.get(bob_secret, alice_public).open(blob) == b"via cache"


def test_canonical_json_is_compact_utf8_in_insertion_order() -> None:
    payload = {"type": "notification", "title": "Grüße", "body": "日本", "n": 1, "ok": True, "none": None}
    assert (
        canonical_json(payload)
        == '{"type":"notification","title":"Grüße","body":"日本","n":1,"ok":true,"none":null}'.encode()
    )
    assert canonical_json({"b": 1, "a": 2}) == b'{"b":1,"a":2}'


def test_canonical_json_refuses_nan_and_infinity() -> None:
    for value in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="JSON"):
            canonical_json({"x": value})
