"""Alembic migrations build exactly the tables the models describe, on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Engine, inspect, text
from sqlmodel import SQLModel

import oauth.tables  # noqa: F401  (the authorization server's tables share the migration history)
from core.store import migrate
from core.store.database import make_engine


def test_migrations_match_the_models(engine: Engine) -> None:
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        assert compare_metadata(context, SQLModel.metadata) == []


def test_migrating_twice_changes_nothing(engine: Engine) -> None:
    before = sorted(inspect(engine).get_table_names())
    migrate.upgrade(engine)
    assert sorted(inspect(engine).get_table_names()) == before
    assert "alembic_version" in before


def test_sqlite_runs_in_wal_mode_with_foreign_keys(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'wal.db'}")
    migrate.upgrade(engine)
    with engine.connect() as connection:
        assert connection.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert connection.execute(text("PRAGMA foreign_keys")).scalar() == 1
    engine.dispose()


def test_trimming_a_queue_reads_the_index_of_unpinned_entries_alone(tmp_path: Path) -> None:
    """Each enqueue finds the recipient's 200th newest unpinned entry; with the partial index
    SQLite does so without reading each candidate row for its tag."""
    from core.services.delivery import _TRIM

    engine = make_engine(f"sqlite:///{tmp_path / 'plan.db'}")
    migrate.upgrade(engine)
    sql = str(_TRIM.statement.compile(dialect=engine.dialect))
    with engine.connect() as connection:
        plan = connection.exec_driver_sql("EXPLAIN QUERY PLAN " + sql, ("dev_a", "dev_a", 1, 199)).all()
    engine.dispose()
    details = [row[-1] for row in plan]
    assert sum("ix_queued_envelopes_unpinned" in detail for detail in details) == 2, details
