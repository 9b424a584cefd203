"""What the API tests over a real socket share: a client of the live server, a registered phone and
a sender token of its account (the ``live_server`` fixture serves the app per store backend)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.helpers import FakeDevice, create_token, register_phone


@pytest.fixture
def http(live_server: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live_server, timeout=30) as client:
        yield client


@pytest.fixture
def phone(http: httpx.Client) -> FakeDevice:
    return register_phone(http, name="Pixel")


@pytest.fixture
def caller(http: httpx.Client, phone: FakeDevice) -> dict[str, str]:
    """The ``Authorization`` header of a sender token of ``phone``'s account."""
    return {"Authorization": f"Bearer {create_token(http, phone)['token']}"}
