"""one recipient queue index: the index of a device's entries and the covering index of its unpinned
ones become one index on (recipient, seq, tag) of every entry. Each queue entry written or trimmed
then updates two indexes, not three. Replaying a send's queue statements on SQLite: 31.7 -> 26.4 us
of CPU per device with one send a transaction, 20.0 -> 18.5 with four sharing one (group commit),
within bench/send.py's noise; on PostgreSQL a device's newest seq is read from this index instead
of walking the primary key backwards. The cap's walk skips the few pinned entries in the index

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-26 07:20:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0015'
down_revision: str | None = '0014'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = 'queued_envelopes'
UNPINNED = sa.text('tag IS NULL')


def upgrade() -> None:
    op.create_index('ix_queued_envelopes_recipient_seq', TABLE, ['recipient_device_id', 'seq', 'tag'], unique=False)
    op.drop_index('ix_queued_envelopes_unpinned', table_name=TABLE)
    op.drop_index('ix_queued_envelopes_recipient_device_id', table_name=TABLE)


def downgrade() -> None:
    op.create_index('ix_queued_envelopes_recipient_device_id', TABLE, ['recipient_device_id'], unique=False)
    op.create_index(
        'ix_queued_envelopes_unpinned',
        TABLE,
        ['recipient_device_id', 'seq', 'tag'],
        unique=False,
        sqlite_where=UNPINNED,
        postgresql_where=UNPINNED,
    )
    op.drop_index('ix_queued_envelopes_recipient_seq', table_name=TABLE)
