"""Where the database's schema stands against this release's migrations. A database a newer release
migrated (a rollback to this release, or this release's replicas still running while a newer one
rolls out) carries a revision this release does not know: it is left as it is, and this release
runs on it, which expand-then-contract migrations allow (docs/operations.md, "Upgrades"). Alembic
would otherwise stop every start with "Can't locate revision"."""

from __future__ import annotations

from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from sqlalchemy import Engine

from core.store import migrate


def newer_schema(engine: Engine) -> str | None:
    """The database's revision when this release's migrations do not know it, else ``None``."""
    scripts = ScriptDirectory.from_config(migrate.alembic_config())
    known = {script.revision for script in scripts.walk_revisions()}
    with engine.connect() as connection:
        current = MigrationContext.configure(connection).get_current_revision()
    return current if current is not None and current not in known else None


def upgrade_unless_newer(engine: Engine) -> str | None:
    """``migrate.upgrade`` to this release's newest schema, unless the database is at a newer one:
    then nothing is changed and that revision is returned."""
    try:
        migrate.upgrade(engine)
    except CommandError:  # "Can't locate revision": asked only then, so a normal start pays nothing
        newer = newer_schema(engine)
        if newer is None:
            raise
        return newer
    return None
