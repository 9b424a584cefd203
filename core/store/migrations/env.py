"""Alembic environment: runs against the connection handed in by ``core.store.migrate``."""

from __future__ import annotations

from alembic import context
from sqlmodel import SQLModel

import core.store.tables  # noqa: F401  (registers the tables on SQLModel.metadata)
import oauth.tables  # noqa: F401  (the authorization server's tables share this history)

config = context.config
target_metadata = SQLModel.metadata


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is None:
        raise RuntimeError("core.store.migrate passes the connection; run 'relaybox migrate'")
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations_online()
