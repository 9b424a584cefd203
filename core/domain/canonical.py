"""Compact UTF-8 JSON, byte-identical on every platform: the plaintext form of envelope payloads."""

from __future__ import annotations

import json
from typing import Any


def canonical_json(obj: Any) -> bytes:
    """Serialize without whitespace, non-ASCII kept as UTF-8, NaN refused, dict order kept as inserted.

    Field order is part of the payload contract, so keys are never sorted.
    """
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
