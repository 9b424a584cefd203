"""The 60-digit safety number two paired devices compare to detect a substituted key."""

from __future__ import annotations

import hashlib

SAFETY_TAG = b"platform-safety-v1"
ITERATIONS = 5200
GROUPS = 12
GROUP_BYTES = 5
GROUP_DIGITS = 5
GROUP_MODULUS = 10**GROUP_DIGITS
_KEY_LENGTH = 32


def safety_number(public_a: bytes, public_b: bytes) -> str:
    """Return the 60 decimal digits for two 32-byte X25519 public keys, in either order."""
    for key in (public_a, public_b):
        if not isinstance(key, bytes) or len(key) != _KEY_LENGTH:
            raise ValueError("public keys must be 32 bytes")
    low, high = sorted((public_a, public_b))  # bytes compare as unsigned, lexicographically
    digest = hashlib.sha512(SAFETY_TAG + low + high).digest()
    for _ in range(ITERATIONS - 1):
        digest = hashlib.sha512(digest).digest()
    groups = []
    for g in range(GROUPS):
        value = int.from_bytes(digest[g * GROUP_BYTES : (g + 1) * GROUP_BYTES], "big")
        groups.append(str(value % GROUP_MODULUS).zfill(GROUP_DIGITS))
    return "".join(groups)


def format_safety_number(number: str) -> str:
    """Group a 60-digit safety number as 12 blocks of 5 digits separated by spaces."""
    if (
        not isinstance(number, str)
        or len(number) != GROUPS * GROUP_DIGITS
        or not number.isascii()
        or not number.isdigit()
    ):
        raise ValueError("a safety number is 60 decimal digits")
    return " ".join(number[i : i + GROUP_DIGITS] for i in range(0, len(number), GROUP_DIGITS))
