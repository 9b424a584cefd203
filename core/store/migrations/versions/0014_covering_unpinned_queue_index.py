"""covering unpinned queue index: the index of unpinned queue entries also holds their tag (always
NULL there), so SQLite finds a device's 200th newest unpinned entry in the index alone; without the
column it read each of the 200 rows for its tag (PostgreSQL needed no such help)

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-26 03:40:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0014'
down_revision: str | None = '0013'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UNPINNED = sa.text('tag IS NULL')


def _index_unpinned(columns: list[str]) -> None:
    op.drop_index('ix_queued_envelopes_unpinned', table_name='queued_envelopes')
    op.create_index(
        'ix_queued_envelopes_unpinned',
        'queued_envelopes',
        columns,
        unique=False,
        sqlite_where=UNPINNED,
        postgresql_where=UNPINNED,
    )


def upgrade() -> None:
    _index_unpinned(['recipient_device_id', 'seq', 'tag'])


def downgrade() -> None:
    _index_unpinned(['recipient_device_id', 'seq'])
