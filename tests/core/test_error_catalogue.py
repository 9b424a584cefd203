"""The error catalogue's promises that hold for every code."""

from __future__ import annotations

import json

import pytest

from core.api.errors import render
from core.errors import CATALOGUE, RelayError

TOO_MANY = sorted(code for code, spec in CATALOGUE.items() if spec.status == 429)


@pytest.mark.parametrize("code", TOO_MANY)
def test_every_429_says_when_to_try_again(code: str) -> None:
    error = RelayError(code)
    assert int(error.headers["Retry-After"]) >= 1


def test_a_raiser_that_knows_when_keeps_its_own_retry_after() -> None:
    assert RelayError("rate_limit_exceeded", headers={"Retry-After": "42"}).headers["Retry-After"] == "42"


def test_other_errors_carry_no_retry_after() -> None:
    assert "Retry-After" not in RelayError("invalid_code").headers


def test_an_error_that_echoes_half_a_surrogate_pair_still_renders() -> None:
    echoed = RelayError("no_matching_device", details={"device": ["\ud800", "é"]})
    rendered = render(echoed)
    assert rendered.status_code == 400
    assert json.loads(bytes(rendered.body))["error"]["details"] == {"device": ["\ud800", "é"]}
