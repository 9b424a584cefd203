from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from core.domain.keys import generate_keypair
from core.domain.safety import format_safety_number, safety_number

VECTORS: dict[str, Any] = json.loads(
    (Path(__file__).resolve().parents[3] / "vectors" / "safety_number.json").read_text(encoding="utf-8")
)
CASES: list[dict[str, Any]] = VECTORS["cases"]


def spec_reading(public_a: bytes, public_b: bytes) -> str:
    """The spec's steps spelled out a second way, as an independent check of the module."""
    seed = b"platform-safety-v1" + min(public_a, public_b) + max(public_a, public_b)
    assert len(seed) == 82
    h = hashlib.sha512(seed).digest()
    for _ in range(5199):
        h = hashlib.sha512(h).digest()
    digits = ""
    for g in range(12):
        value = 0
        for byte in h[g * 5 : g * 5 + 5]:
            value = value * 256 + byte
        digits += "%05d" % (value % 100000)  # noqa: UP031
    return digits


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_safety_number_matches_the_vector_in_both_argument_orders(case: dict[str, Any]) -> None:
    a, b = bytes.fromhex(case["public_a"]), bytes.fromhex(case["public_b"])
    assert safety_number(a, b) == case["number"]
    assert safety_number(b, a) == case["number"]
    assert format_safety_number(case["number"]) == case["formatted"]


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_vectors_agree_with_a_literal_reading_of_the_spec(case: dict[str, Any]) -> None:
    a, b = bytes.fromhex(case["public_a"]), bytes.fromhex(case["public_b"])
    assert spec_reading(a, b) == case["number"]
    assert (a < b) is case["a_sorts_first"]


def test_safety_number_is_symmetric_for_fresh_keys() -> None:
    _, a = generate_keypair()
    _, b = generate_keypair()
    number = safety_number(a, b)
    assert number == safety_number(b, a)
    assert len(number) == 60
    assert number.isdigit()


def test_safety_number_changes_when_either_key_is_substituted() -> None:
    _, a = generate_keypair()
    _, b = generate_keypair()
    _, mallory = generate_keypair()
    number = safety_number(a, b)
    assert safety_number(a, mallory) != number
    assert safety_number(mallory, b) != number


def test_safety_number_orders_keys_as_unsigned_bytes() -> None:
    low = b"\x7f" + bytes(31)
    high = b"\x80" + bytes(31)
    assert safety_number(high, low) == spec_reading(low, high)


@pytest.mark.parametrize("length", [0, 31, 33, 64])
def test_safety_number_rejects_keys_that_are_not_32_bytes(length: int) -> None:
    _, good = generate_keypair()
    with pytest.raises(ValueError, match="32 bytes"):
        safety_number(good, b"\x01" * length)
    with pytest.raises(ValueError, match="32 bytes"):
        safety_number(b"\x01" * length, good)


def test_safety_number_rejects_keys_that_are_not_bytes() -> None:
    _, good = generate_keypair()
    with pytest.raises(ValueError, match="32 bytes"):
        safety_number(good, good.hex())  # type: ignore[arg-type]


def test_format_groups_sixty_digits_into_twelve_blocks_of_five() -> None:
    number = "".join(str(i % 10) for i in range(60))
    formatted = format_safety_number(number)
    assert formatted.split(" ") == [number[i : i + 5] for i in range(0, 60, 5)]


@pytest.mark.parametrize("number", ["1" * 59, "1" * 61, "1" * 59 + "x", "\u0661" * 60, ""])
def test_format_rejects_anything_but_sixty_ascii_digits(number: str) -> None:
    with pytest.raises(ValueError, match="60 decimal digits"):
        format_safety_number(number)
