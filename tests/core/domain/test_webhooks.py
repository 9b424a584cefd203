"""A callback receiver's ``Retry-After``, in both of RFC 9110's forms."""

from __future__ import annotations

import pytest

from core.domain.webhooks import retry_after_seconds

NOW = 1_784_000_000.0  # 2026-07-14T03:33:20Z


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("120", 120),
        (" 0 ", 0),
        ("Tue, 14 Jul 2026 03:38:20 GMT", 300),  # IMF-fixdate, 5 minutes on
        ("Tuesday, 14-Jul-26 03:38:20 GMT", 300),  # RFC 850
        ("Tue Jul 14 03:38:20 2026", 300),  # asctime: no zone, read as GMT
        ("Tue, 14 Jul 2026 03:00:00 GMT", 0),  # a date already past: at once
        ("99999999999999999999", 999_999_999_999),  # absurd: the caller caps it
    ],
)
def test_retry_after_is_read_as_seconds_from_now(value: str, seconds: int) -> None:
    assert retry_after_seconds(value, NOW) == seconds


@pytest.mark.parametrize("value", [None, "", "-5", "1.5", "soon", "Tue, 99 Foo 2026", "²", "١٢"])
def test_a_missing_or_malformed_retry_after_is_none(value: str | None) -> None:
    assert retry_after_seconds(value, NOW) is None
