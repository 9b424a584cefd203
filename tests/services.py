"""Reaching the machine's PostgreSQL and Redis from tests.

On a laptop without them the tests that need them skip with a reason; with
RELAYBOX_REQUIRE_SERVICES=1 (CI) a missing service fails the run instead.
"""

from __future__ import annotations

import os

import pytest

POSTGRES_URL = os.environ.get("RELAYBOX_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("RELAYBOX_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


def services_required() -> bool:
    return os.environ.get("RELAYBOX_REQUIRE_SERVICES") == "1"


def unavailable(what: str, error: BaseException) -> None:
    """Skip (laptop) or fail (CI) because ``what`` cannot be reached."""
    message = f"{what} is not reachable ({type(error).__name__}: {error})"
    if services_required():
        pytest.fail(message + " and RELAYBOX_REQUIRE_SERVICES=1", pytrace=False)
    pytest.skip(message + "; set RELAYBOX_REQUIRE_SERVICES=1 to make this an error")
