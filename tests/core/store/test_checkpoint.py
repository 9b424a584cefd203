"""On a SQLite file, commits never checkpoint (a checkpoint fsyncs under the write lock and stalls
every write behind it); a running Core checkpoints in the background instead, so what was
committed reaches the database file within a few seconds and the WAL stays short."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest
from sqlalchemy import Engine, text

from core.bootstrap import build_core
from core.settings import explicit_settings
from core.store.database import checkpoint, make_engine

MARKER = b"checkpoint-marker-7f3a"


def write_marker(engine: Engine) -> None:
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE IF NOT EXISTS scratch (value TEXT)"))
        connection.execute(text("INSERT INTO scratch (value) VALUES (:value)"), {"value": MARKER.decode()})


def in_database_file(path: Path) -> bool:
    return MARKER in path.read_bytes()


def test_commits_leave_the_wal_to_the_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "relaybox.db"
    engine = make_engine(f"sqlite:///{path}")
    try:
        write_marker(engine)
        with engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() == 0
        assert not in_database_file(path)  # committed, still only in the WAL
        frames, copied = checkpoint(engine)
        assert frames > 0 and copied == frames
        assert in_database_file(path)
    finally:
        engine.dispose()


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_running_core_checkpoints_in_the_background(tmp_path: Path, anyio_backend: str) -> None:
    path = tmp_path / "relaybox.db"
    core = build_core(explicit_settings(data_dir=tmp_path / "data", database_url=f"sqlite:///{path}"))
    async with core:
        await anyio.to_thread.run_sync(write_marker, core.engine)
        assert not in_database_file(path)
        deadline = time.monotonic() + 10
        while not in_database_file(path):
            assert time.monotonic() < deadline, "nothing was checkpointed within 10 s"
            await anyio.sleep(0.1)
