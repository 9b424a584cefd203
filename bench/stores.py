"""What relaybox replicas share in production, made fresh for one benchmark run: a PostgreSQL
database (created on the server of ``--postgres``, dropped afterwards), a Redis key namespace of the
run's own (its keys deleted afterwards) and one server key, as ``RELAYBOX_*`` settings.

The scripts import it as ``stores`` (``bench/`` is on ``sys.path``); it is not a benchmark.
"""

from __future__ import annotations

import argparse
import os
import secrets
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from core.domain.keys import generate_keypair
from devices import b64

DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
DEFAULT_REDIS = "redis://127.0.0.1:6379/15"


def add_store_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--postgres",
        default=os.environ.get("RELAYBOX_TEST_DATABASE_URL", DEFAULT_POSTGRES),
        help="a database on the PostgreSQL server to create the run's own database on (%(default)s)",
    )
    parser.add_argument(
        "--redis",
        default=os.environ.get("RELAYBOX_TEST_REDIS_URL", DEFAULT_REDIS),
        help="the Redis the PostgreSQL runs use, under a namespace of the run's own (%(default)s)",
    )


def analyze(database_url: str) -> None:
    """``ANALYZE`` the run's database, as autovacuum does on a default PostgreSQL once a table has
    grown. Run after the warm-up: the statistics (and so the plans relaybox's prepared statements
    are made with afresh, as ANALYZE invalidates them) are those of queues at their cap, not of the
    empty tables the warm-up began with. Without it, on a server with autovacuum off (this machine's
    CI configuration), the queue statement kept a plan made for an empty table all run long."""
    from sqlalchemy import create_engine, text

    engine = create_engine(  # bounded: a bench must end even if PostgreSQL stops answering
        database_url.replace("postgresql://", "postgresql+psycopg://", 1),
        connect_args={"connect_timeout": 10, "options": "-c statement_timeout=60000"},
    )
    try:
        with engine.begin() as connection:
            connection.execute(text("ANALYZE"))
    finally:
        engine.dispose()


@contextmanager
def shared_store(postgres_url: str, redis_url: str) -> Iterator[dict[str, str]]:
    """A fresh PostgreSQL database, a Redis key namespace and a server key, as the ``RELAYBOX_*``
    settings of every replica; afterwards the database is dropped and the namespace's keys deleted."""
    from sqlalchemy import create_engine, text  # only here: a SQLite run needs no extras

    from core.adapters.limits.redis import RedisRateLimiter

    name = f"relaybox_bench_{secrets.token_hex(4)}"
    namespace = f"relaybox-bench-{secrets.token_hex(4)}"
    admin = create_engine(
        postgres_url.replace("postgresql://", "postgresql+psycopg://", 1), isolation_level="AUTOCOMMIT"
    )
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
        try:
            with tempfile.TemporaryDirectory(prefix="relaybox-bench-objects-") as objects:
                yield {
                    "RELAYBOX_DATABASE_URL": f"{postgres_url.rpartition('/')[0]}/{name}",
                    "RELAYBOX_REDIS_URL": redis_url,
                    "RELAYBOX_REDIS_NAMESPACE": namespace,
                    "RELAYBOX_SERVER_SECRET_KEY": b64(generate_keypair()[0]),
                    # serve on PostgreSQL refuses a store of its own: one folder every replica shares
                    "RELAYBOX_FILE_STORE_DIR": objects,
                }
        finally:
            with admin.connect() as connection:
                connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            limits = RedisRateLimiter(redis_url, namespace=namespace)
            limits.reset()
            limits.close()
    finally:
        admin.dispose()
