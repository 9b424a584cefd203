"""Secrets and identifiers: shapes, reserved prefixes, entropy sources."""

from __future__ import annotations

import re

from core.domain.payloads import TokenSummary, encode, token_update
from core.domain.secrets import (
    RESERVED_PREFIXES,
    SCANNER_PATTERN,
    is_device_credential,
    is_sender_token,
    new_device_credential,
    new_pairing_code,
    new_sender_token,
    pairing_code_digest,
)


def test_only_live_sender_tokens_are_ever_issued() -> None:
    tokens = {new_sender_token() for _ in range(200)}
    assert len(tokens) == 200
    assert all(re.fullmatch(r"rfk_live_[A-Za-z0-9]{32}", token) for token in tokens)
    assert all(SCANNER_PATTERN.fullmatch(token) for token in tokens)


def test_test_and_receiver_prefixes_are_recognised_shapes_but_reserved() -> None:
    assert is_sender_token("rfk_test_" + "a" * 32)
    assert not is_sender_token("rfd_live_" + "a" * 32)
    assert SCANNER_PATTERN.fullmatch("rfd_live_" + "a" * 32)
    assert set(RESERVED_PREFIXES) == {"rfk_live_", "rfk_test_", "rfd_live_"}


def test_device_credentials_never_look_like_sender_tokens() -> None:
    for _ in range(200):
        credential = new_device_credential()
        assert is_device_credential(credential)
        assert not credential.startswith(RESERVED_PREFIXES)
        assert SCANNER_PATTERN.search(credential) is None


def test_pairing_codes_are_six_zero_padded_digits_covering_the_range() -> None:
    codes = [new_pairing_code() for _ in range(3000)]
    assert all(re.fullmatch(r"[0-9]{6}", code) for code in codes)
    assert any(code.startswith("0") for code in codes)  # zero padding is exercised (p ≈ 1 - 0.9^3000)
    assert len(set(codes)) > 2900


def test_a_pairing_code_digest_depends_on_the_server_key() -> None:
    assert pairing_code_digest("123456", b"a" * 32) != pairing_code_digest("123456", b"b" * 32)
    assert "123456" not in pairing_code_digest("123456", b"a" * 32)


def test_token_update_serializes_in_the_documented_field_order() -> None:
    payload = token_update([TokenSummary("tok_1", "cron ✓", None, "high", 5)], at=7)
    assert (
        encode(payload)
        == (
            '{"type":"token_update","at":7,"tokens":[{"id":"tok_1","label":"cron ✓","priority_cap":"high",'
            '"created_at":5}]}'
        ).encode()
    )
