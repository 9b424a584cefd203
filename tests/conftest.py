"""Shared fixtures: a migrated database on SQLite or PostgreSQL, a Core, an in-process HTTP client."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import google.auth._regional_access_boundary_utils as regional_access_boundary
import pytest
from sqlalchemy import Engine, text
from sqlmodel import SQLModel
from starlette.testclient import TestClient

import oauth.tables  # noqa: F401  (SQLModel.metadata must hold the authorization server's tables)
from app.assembly import create_app
from core.bootstrap import build_core
from core.clock import ManualClock
from core.runtime.core import Core
from core.settings import Settings, explicit_settings
from core.store.database import make_engine
from tests.browser import browser, chromium  # noqa: F401  (Chromium, for every page test)
from tests.fakes.fcm_server import FakeFcm
from tests.fakes.webpush_server import FakeWebPushService
from tests.live import serve_in_thread
from tests.services import fresh_postgres_database

BACKENDS = ["sqlite", "postgres"]
SUMMARY_LINES = pytest.StashKey[list[str]]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[SUMMARY_LINES] = []


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The one-line results of the reliability checks (faults, load, privacy, secrets), printed
    whatever the verbosity, so CI logs show the numbers and not only a pass."""
    lines = terminalreporter.config.stash.get(SUMMARY_LINES, [])
    if lines:
        terminalreporter.section("reliability")
        for line in lines:
            terminalreporter.write_line(line)


@pytest.fixture
def summary(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """``summary("privacy[sqlite]: …")`` adds a line to the reliability section of the report."""
    return request.config.stash[SUMMARY_LINES].append


@pytest.fixture(autouse=True)
def no_regional_access_boundary_lookup(monkeypatch: pytest.MonkeyPatch) -> None:
    """google-auth starts a background lookup at iamcredentials.googleapis.com on first use of FCM
    credentials; tests stay on 127.0.0.1."""
    monkeypatch.setattr(
        regional_access_boundary._RegionalAccessBoundaryManager, "maybe_start_refresh", lambda *_: None
    )


@pytest.fixture(scope="session")
def postgres_database() -> Iterator[str]:
    """A fresh PostgreSQL database for this test session, dropped at the end."""
    with fresh_postgres_database() as url:
        yield url


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database URL on each backend, empty of rows at the start of the test."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'relaybox.db'}"
        return
    url: str = request.getfixturevalue("postgres_database")
    yield url
    _empty_all_tables(url)


def _empty_all_tables(url: str) -> None:
    engine = make_engine(url)
    try:
        with engine.begin() as connection:
            names = ", ".join(f'"{t.name}"' for t in SQLModel.metadata.sorted_tables)
            connection.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))
    finally:
        engine.dispose()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    return explicit_settings(data_dir=tmp_path / "data", database_url=database_url)


@pytest.fixture
def core(settings: Settings, clock: ManualClock) -> Iterator[Core]:
    built = build_core(settings, clock=clock)
    yield built
    built.engine.dispose()


@pytest.fixture
def client(core: Core) -> Iterator[TestClient]:
    with TestClient(create_app(core=core)) as test_client:
        yield test_client


@pytest.fixture
def engine(core: Core) -> Engine:
    return core.engine


@pytest.fixture
def live_server(core: Core) -> Iterator[str]:
    """The app under uvicorn on a real loopback socket, in this process (so the test keeps its clock)."""
    with serve_in_thread(create_app(core=core)) as url:
        yield url


@pytest.fixture
def fcm() -> Iterator[FakeFcm]:
    """A fake FCM (and OAuth token endpoint) on loopback, for the real firebase-admin code."""
    with FakeFcm() as fake:
        yield fake


@pytest.fixture
def push_service() -> Iterator[FakeWebPushService]:
    """A fake web-push service on loopback that checks VAPID and decrypts what it receives."""
    with FakeWebPushService() as fake:
        yield fake
