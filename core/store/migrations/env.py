"""Alembic environment: runs against the connection handed in by ``core.store.migrate``.

The history holds the core's tables and the authorization server's (``oauth.tables``), but this
module imports only the core's: ``target_metadata`` is what the process has registered on
``SQLModel.metadata``, which matters only for comparing the schema with the models (the
application, and ``tests/core/store/test_migrations.py``, import ``oauth.tables`` too). Running the
migrations reads nothing from it."""

from __future__ import annotations

from alembic import context
from sqlmodel import SQLModel

import core.store.tables  # noqa: F401  (registers the tables on SQLModel.metadata)

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
