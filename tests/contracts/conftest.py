"""What the contract tests of the Redis adapters share: the test Redis and a namespace per test."""

from __future__ import annotations

import secrets

import pytest

from tests.services import require_redis


@pytest.fixture
def redis_url() -> str:
    """The test Redis, or a skip (a failure under RELAYBOX_REQUIRE_SERVICES=1)."""
    return require_redis()


@pytest.fixture
def namespace() -> str:
    """Keys and channels of one test only: tests (and test runs) sharing the Redis do not meet."""
    return f"relaybox-test-{secrets.token_hex(6)}"
