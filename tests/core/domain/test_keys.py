from __future__ import annotations

import base64
from typing import Any

import pytest
from nacl.public import PrivateKey

from core.domain.keys import InvalidPublicKey, b64encode, decode_public_key, generate_keypair, public_key_of


def test_generate_keypair_returns_a_32_byte_secret_and_its_public_key() -> None:
    secret, public = generate_keypair()
    assert len(secret) == 32
    assert len(public) == 32
    assert bytes(PrivateKey(secret).public_key) == public


def test_generate_keypair_never_repeats_a_secret() -> None:
    assert len({generate_keypair()[0] for _ in range(20)}) == 20


def test_public_key_of_derives_the_x25519_public_key() -> None:
    secret, public = generate_keypair()
    assert public_key_of(secret) == public


def test_public_key_of_matches_the_rfc_7748_test_vector() -> None:
    alice_secret = bytes.fromhex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
    alice_public = "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"
    assert public_key_of(alice_secret).hex() == alice_public


@pytest.mark.parametrize("secret", [b"", b"\x01" * 31, b"\x01" * 33])
def test_public_key_of_rejects_a_secret_that_is_not_32_bytes(secret: bytes) -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        public_key_of(secret)


def test_b64encode_is_standard_padded_base64() -> None:
    assert b64encode(b"\xfb\xff") == "+/8="
    assert b64encode(b"") == ""


def test_decode_public_key_round_trips_b64encode() -> None:
    _, public = generate_keypair()
    text = b64encode(public)
    assert len(text) == 44
    assert decode_public_key(text) == public


@pytest.mark.parametrize(
    "text",
    [
        b64encode(b"\x01" * 31),
        b64encode(b"\x01" * 33),
        "",
        b64encode(b"\xfb" * 32).replace("+", "-").replace("/", "_"),  # URL-safe alphabet
        b64encode(b"\x01" * 32).rstrip("="),  # padding missing
        b64encode(b"\x01" * 32) + "\n",
        " " + b64encode(b"\x01" * 32),
        b64encode(b"\x01" * 32)[:-2] + "é=",
        "A" * 10_000,
    ],
    ids=["31-bytes", "33-bytes", "empty", "urlsafe", "unpadded", "newline", "space", "non-ascii", "huge"],
)
def test_decode_public_key_rejects_text_that_is_not_strict_base64_of_32_bytes(text: str) -> None:
    with pytest.raises(InvalidPublicKey):
        decode_public_key(text)


def test_decode_public_key_rejects_non_canonical_trailing_bits() -> None:
    canonical = b64encode(bytes(32))
    assert canonical.endswith("A=")
    sloppy = canonical[:-2] + "B="
    assert base64.b64decode(sloppy, validate=True) == bytes(32)
    with pytest.raises(InvalidPublicKey):
        decode_public_key(sloppy)


@pytest.mark.parametrize("value", [None, 42, b"AAAA", ["A"]], ids=["none", "int", "bytes", "list"])
def test_decode_public_key_rejects_values_that_are_not_strings(value: Any) -> None:
    with pytest.raises(InvalidPublicKey):
        decode_public_key(value)


def test_invalid_public_key_is_a_value_error() -> None:
    assert issubclass(InvalidPublicKey, ValueError)
