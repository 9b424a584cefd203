"""Fixtures of the core's async tests: they run on asyncio, some with the Core running."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from core.runtime.core import Core


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def running(core: Core) -> AsyncIterator[Core]:
    """The ``core`` fixture, started (its background tasks running) for the test."""
    async with core:
        yield core
