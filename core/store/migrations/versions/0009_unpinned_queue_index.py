"""unpinned queue index: each enqueue keeps a device's newest 200 unpinned entries, found in an
index of those entries alone instead of by reading every candidate row for its tag

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25 20:40:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0009'
down_revision: str | None = '0008'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UNPINNED = sa.text('tag IS NULL')


def upgrade() -> None:
    op.create_index(
        'ix_queued_envelopes_unpinned',
        'queued_envelopes',
        ['recipient_device_id', 'seq'],
        unique=False,
        sqlite_where=UNPINNED,
        postgresql_where=UNPINNED,
    )


def downgrade() -> None:
    op.drop_index('ix_queued_envelopes_unpinned', table_name='queued_envelopes')
