"""Fixtures for the push adapters: the fake far ends run on 127.0.0.1 for one test each."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.webpush_server import FakeWebPushService


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def other_push_service() -> Iterator[FakeWebPushService]:
    with FakeWebPushService() as fake:
        yield fake
