"""Reaching the machine's PostgreSQL and Redis from tests.

On a laptop without them the tests that need them skip with a reason; with
RELAYBOX_REQUIRE_SERVICES=1 (CI) a missing service fails the run instead.
"""

from __future__ import annotations

import base64
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

import pytest
from sqlalchemy import create_engine, text

POSTGRES_URL = os.environ.get("RELAYBOX_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("RELAYBOX_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


def services_required() -> bool:
    return os.environ.get("RELAYBOX_REQUIRE_SERVICES") == "1"


def missing(message: str) -> NoReturn:
    """Skip (laptop) or fail (CI) because what the test needs, ``message`` says, is not here."""
    if services_required():
        pytest.fail(message + " and RELAYBOX_REQUIRE_SERVICES=1", pytrace=False)
    pytest.skip(message + "; set RELAYBOX_REQUIRE_SERVICES=1 to make this an error")


def unavailable(what: str, error: BaseException) -> NoReturn:
    """Skip (laptop) or fail (CI) because ``what`` cannot be reached."""
    missing(f"{what} is not reachable ({type(error).__name__}: {error})")


def require_redis() -> str:
    """The test Redis's URL once it answers PING; otherwise a skip (a failure in CI)."""
    import redis

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError as error:
        unavailable("Redis", error)
    finally:
        client.close()
    return REDIS_URL


@contextmanager
def fresh_postgres_database() -> Iterator[str]:
    """A new, empty database on the machine's PostgreSQL (its URL), dropped afterwards."""
    name = f"relaybox_test_{secrets.token_hex(4)}"
    admin_url = POSTGRES_URL.replace("postgresql://", "postgresql+psycopg://", 1)
    try:
        admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as error:  # any connection failure means: not reachable here
        unavailable("PostgreSQL", error)
    base, _, _ = POSTGRES_URL.rpartition("/")
    try:
        yield f"{base}/{name}"
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def replica_env(shared_folder: Path) -> dict[str, str]:
    """What ``relaybox serve`` on PostgreSQL requires (``core.startup``): a server key every replica
    holds (a new one: give every replica of a test the same dict) and an object store every replica
    reaches, here a folder on this machine that they share."""
    return {
        "RELAYBOX_SERVER_SECRET_KEY": base64.b64encode(secrets.token_bytes(32)).decode(),
        "RELAYBOX_FILE_STORE_DIR": str(shared_folder),
    }
