"""Apply Alembic migrations programmatically (``relaybox migrate`` and start-up)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, text

MIGRATIONS = Path(__file__).parent / "migrations"
# The PostgreSQL advisory lock migrations hold (any constant of our own; it spells "relaybox").
MIGRATION_LOCK = int.from_bytes(b"relaybox", "big")


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the database at ``engine`` to ``revision``; safe to run on every start, also by several
    replicas starting at once: on PostgreSQL they take turns (an advisory lock held until commit),
    and each after the first finds the schema current. SQLite's write lock serialises them anyway."""
    config = alembic_config()
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
        config.attributes["connection"] = connection
        command.upgrade(config, revision)
