"""Alembic migrations build exactly the tables the models describe, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from alembic import command
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


def _plan(engine: Engine, statement: object, parameter: dict[str, object]) -> list[str]:
    """SQLite's query plan of a prepared statement's statement, each named parameter given."""
    compiled = statement.compile(dialect=engine.dialect)  # type: ignore[attr-defined]
    names = compiled.positiontup or ()
    parameters = tuple(parameter.get(name, compiled.params[name]) for name in names)
    with engine.connect() as connection:
        return [
            row[-1] for row in connection.exec_driver_sql("EXPLAIN QUERY PLAN " + compiled.string, parameters)
        ]


def test_trimming_a_queue_reads_the_recipient_index_alone(tmp_path: Path) -> None:
    """Each queue write finds what a full queue drops: its oldest own unpinned row in the recipient
    index alone (covering: it holds the tag), without reading each candidate row for its tag, and
    its oldest packed row in its account's rows in that index from its floor (the first there, or
    walking on); it reads the recipient's count by its key."""
    from core.queue._packed import FIRST_AT_FLOOR, OLDEST_LISTING
    from core.queue._sqlite_sql import BEFORE

    engine = make_engine(f"sqlite:///{tmp_path / 'plan.db'}")
    migrate.upgrade(engine)
    index = "ix_queued_envelopes_recipient_seq"
    try:
        plan = _plan(engine, BEFORE[False].statement, {"recipients": '["dev_a"]'})
        assert [detail for detail in plan if "older" in detail] == [
            f"SEARCH older USING COVERING INDEX {index} (recipient_device_id=?)"
        ], plan
        assert [detail for detail in plan if "queue_counts" in detail] == [
            "SEARCH queue_counts USING PRIMARY KEY (device_id=?) LEFT-JOIN"
        ], plan
        for statement in (FIRST_AT_FLOOR.statement, OLDEST_LISTING.statement):
            plan = _plan(engine, statement, {"account": "acct", "device": "dev_a", "floor": 7})
            assert plan == [
                f"SEARCH queued_envelopes USING INDEX {index} (recipient_device_id=? AND seq>?)"
            ], plan
    finally:
        engine.dispose()


def _downgrade(engine: Engine, revision: str) -> None:
    config = migrate.alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, revision)


def test_web_push_subscriptions_move_to_push_registrations_and_back(engine: Engine) -> None:
    """0010: each web-push subscription becomes a "web_push" registration holding the JSON of its
    fields, as the service stores one; a downgrade puts them back."""
    subscription = {"endpoint": "https://push.example/p/1", "p256dh": "BKey", "auth": "secret"}
    _downgrade(engine, "0009")
    try:
        with engine.begin() as connection:
            connection.execute(text("INSERT INTO accounts (account_id, created_at) VALUES ('acc', 1)"))
            connection.execute(
                text(
                    "INSERT INTO devices (device_id, account_id, device_type, surface_kind, public_key, name,"
                    " credential_hash, created_at, ever_paired, ever_drained)"
                    " VALUES ('dev', 'acc', 'web', 'phone', 'key', '', 'hash', 2, 0, 0)"
                )
            )
            connection.execute(
                text(
                    "INSERT INTO web_push_subscriptions (device_id, endpoint, p256dh, auth, created_at)"
                    " VALUES ('dev', :endpoint, :p256dh, :auth, 3)"
                ),
                subscription,
            )
        migrate.upgrade(engine)
        with engine.connect() as connection:
            rows = connection.execute(text("SELECT * FROM push_registrations")).mappings().all()
        assert [dict(row) for row in rows] == [
            {
                "device_id": "dev",
                "service": "web_push",
                "registration": json.dumps(subscription, separators=(",", ":")),
                "created_at": 3,
            }
        ]
        _downgrade(engine, "0009")
        with engine.connect() as connection:
            rows = connection.execute(text("SELECT * FROM web_push_subscriptions")).mappings().all()
        assert [dict(row) for row in rows] == [{"device_id": "dev", **subscription, "created_at": 3}]
    finally:
        migrate.upgrade(engine)


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_account_devices_are_read_each_send_again_and_the_versions_come_back_on_a_downgrade(
    engine: Engine,
) -> None:
    """0027: 0022's version table and triggers go; a downgrade to 0026 makes them again."""

    def named_like_versions() -> list[str]:
        with engine.connect() as connection:
            rows = connection.execute(
                text("SELECT name FROM sqlite_master WHERE name LIKE 'account_device%'")
            )
            return sorted(str(name) for (name,) in rows)

    assert named_like_versions() == []
    _downgrade(engine, "0026")
    try:
        assert "account_device_versions" in named_like_versions()
        assert "account_device_versions_device_added" in named_like_versions()
    finally:
        migrate.upgrade(engine)
    assert named_like_versions() == []
