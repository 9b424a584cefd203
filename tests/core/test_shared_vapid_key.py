"""Replicas on one PostgreSQL database sign web push with one VAPID key, though none is configured and
each has a data folder of its own: the first to start keeps its key in the database, sealed with a
key derived from the server key, and the others use it, also when they start at the same moment. A
replica given another server key cannot open it and refuses to start."""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from core.adapters.push.vapid_key import KEY_FILE, SHARED_NAME
from core.bootstrap import build_core
from core.domain.keys import generate_keypair
from core.runtime.core import Core
from core.settings import Settings, explicit_settings
from core.startup import StartupError
from core.store import migrate
from core.store.database import make_engine
from core.store.shared_secrets import keep_once
from tests.services import fresh_postgres_database

pytestmark = pytest.mark.postgres
STARTING_AT_ONCE = 6


@pytest.fixture
def database() -> Iterator[str]:
    with fresh_postgres_database() as url:
        engine = make_engine(url)
        migrate.upgrade(engine)
        engine.dispose()
        yield url


def new_server_key() -> str:
    return base64.b64encode(generate_keypair()[0]).decode()


def replica_settings(folder: Path, database: str, server_key: str) -> Settings:
    return explicit_settings(data_dir=folder, database_url=database, server_secret_key=server_key)


def web_key(settings: Settings) -> str:
    core: Core = build_core(settings)
    try:
        key = core.push.web_push_key
    finally:
        core.engine.dispose()
    assert key is not None
    return key


def kept_value(database: str) -> bytes:
    engine = make_engine(database)
    try:
        with engine.connect() as connection:
            query = text("SELECT value FROM shared_secrets WHERE name = :name")
            value: bytes = connection.execute(query, {"name": SHARED_NAME}).scalar_one()
    finally:
        engine.dispose()
    return value


def test_replicas_with_their_own_data_folders_serve_one_web_push_key(tmp_path: Path, database: str) -> None:
    server_key = new_server_key()
    keys = {web_key(replica_settings(tmp_path / f"replica-{n}", database, server_key)) for n in range(3)}
    assert len(keys) == 1
    assert not list(tmp_path.rglob(KEY_FILE))  # nothing written to a data folder that no other reads


def test_the_kept_key_is_sealed_not_stored_as_it_is_used(tmp_path: Path, database: str) -> None:
    settings = replica_settings(tmp_path / "one", database, new_server_key())
    core = build_core(settings)
    try:
        private_key = core.settings.vapid_private_key
        assert private_key is not None
        used = private_key.get_secret_value().encode()
    finally:
        core.engine.dispose()
    kept = kept_value(database)
    assert used not in kept and base64.urlsafe_b64decode(used + b"=" * (-len(used) % 4)) not in kept


def test_a_server_that_ran_alone_keeps_its_browsers_key_when_it_moves_to_replicas(
    tmp_path: Path, database: str
) -> None:
    alone = explicit_settings(data_dir=tmp_path / "alone")  # SQLite: the key goes to the data folder
    before = web_key(alone)
    assert (tmp_path / "alone" / KEY_FILE).exists()
    server_key = new_server_key()
    first = replica_settings(tmp_path / "alone", database, server_key)  # the same folder, now on PostgreSQL
    second = replica_settings(tmp_path / "new", database, server_key)
    assert web_key(first) == web_key(second) == before


def test_a_replica_with_another_server_key_refuses_to_start(tmp_path: Path, database: str) -> None:
    web_key(replica_settings(tmp_path / "first", database, new_server_key()))
    with pytest.raises(StartupError, match=r"^RELAYBOX_SERVER_SECRET_KEY is not the key"):
        build_core(replica_settings(tmp_path / "second", database, new_server_key()))


def test_replicas_starting_at_once_keep_the_first_candidate(database: str) -> None:
    """Each thread offers its own candidate at the same moment; all get the one that was kept."""
    engine = make_engine(database)
    barrier = threading.Barrier(STARTING_AT_ONCE)
    got: list[bytes] = []

    def start(candidate: bytes) -> None:
        barrier.wait(timeout=10)
        got.append(keep_once(engine, "race", candidate))

    threads = [threading.Thread(target=start, args=(bytes([n]) * 8,)) for n in range(STARTING_AT_ONCE)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert len(got) == STARTING_AT_ONCE
        assert len(set(got)) == 1 and got[0] in {bytes([n]) * 8 for n in range(STARTING_AT_ONCE)}
        assert keep_once(engine, "race", b"later") == got[0]  # never replaced
    finally:
        engine.dispose()
