"""pinned queue entries: a reminder's set and cancel carry a keyed tag and outlive trimming;
on SQLite a queue seq is never reused (AUTOINCREMENT)

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24 23:40:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision: str = '0006'
down_revision: str | None = '0005'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # SQLite hands the largest rowid + 1 to a new row, so deleting the newest entry (expired, or a
    # reminder set removed by its cancel) gave its seq to the next one, which a device that had
    # seen the first then skipped as delivered. AUTOINCREMENT never reuses one; the table is
    # rebuilt for it (PostgreSQL's sequence never did).
    sqlite = op.get_bind().dialect.name == "sqlite"
    with op.batch_alter_table(
        'queued_envelopes',
        schema=None,
        recreate='always' if sqlite else 'auto',
        table_kwargs={'sqlite_autoincrement': True} if sqlite else {},
    ) as batch_op:
        batch_op.add_column(sa.Column('tag', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('queued_envelopes', schema=None) as batch_op:
        batch_op.drop_column('tag')
