"""account devices read each send: 0022's version triggers and table go (issue 49). Keeping an
account's devices between sends saved 2.6 µs a device in-process and nothing measurable served
(``bench/CHANGELOG.md``); a send reads them again, in one statement.

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-07 20:00:00.000000
"""

from collections.abc import Sequence
from importlib import import_module

from alembic import op

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_DEVICE_VERSIONS = "core.store.migrations.versions.0022_account_device_versions"


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for name in import_module(_DEVICE_VERSIONS).TRIGGERS:
            op.execute(f"DROP TRIGGER {name}")
    op.drop_table("account_device_versions")


def downgrade() -> None:
    import_module(_DEVICE_VERSIONS).upgrade()
