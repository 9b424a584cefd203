"""queue counts: on SQLite each device's number of unpinned queue entries, kept by triggers, so a
queue write learns whether it takes the queue over its cap from one row instead of walking the
newest 200 entries of the recipient index (the walk was about half of the queue's SQLite work per
device). PostgreSQL gets the table, empty, and no triggers: its one queue statement is unchanged.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-26 10:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision: str = '0016'
down_revision: str | None = '0015'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Each entry written, removed or changed moves its device's count, whatever statement does it (a
# trim, the expiry sweep, a device's removal, a reminder's cancel); a device's removal drops its row.
TRIGGERS = {
    'queue_counts_insert': """
        CREATE TRIGGER queue_counts_insert AFTER INSERT ON queued_envelopes WHEN NEW.tag IS NULL
        BEGIN
            INSERT INTO queue_counts (device_id, unpinned) VALUES (NEW.recipient_device_id, 1)
            ON CONFLICT (device_id) DO UPDATE SET unpinned = unpinned + 1;
        END""",
    'queue_counts_delete': """
        CREATE TRIGGER queue_counts_delete AFTER DELETE ON queued_envelopes WHEN OLD.tag IS NULL
        BEGIN
            UPDATE queue_counts SET unpinned = unpinned - 1 WHERE device_id = OLD.recipient_device_id;
        END""",
    'queue_counts_update': """
        CREATE TRIGGER queue_counts_update AFTER UPDATE OF recipient_device_id, tag ON queued_envelopes
        WHEN OLD.tag IS NULL OR NEW.tag IS NULL
        BEGIN
            UPDATE queue_counts SET unpinned = unpinned - 1
            WHERE OLD.tag IS NULL AND device_id = OLD.recipient_device_id;
            INSERT INTO queue_counts (device_id, unpinned) SELECT NEW.recipient_device_id, 1
            WHERE NEW.tag IS NULL
            ON CONFLICT (device_id) DO UPDATE SET unpinned = unpinned + 1;
        END""",
    'queue_counts_device_removed': """
        CREATE TRIGGER queue_counts_device_removed AFTER DELETE ON devices
        BEGIN
            DELETE FROM queue_counts WHERE device_id = OLD.device_id;
        END""",
}


def upgrade() -> None:
    op.create_table('queue_counts',
    sa.Column('device_id', sqlmodel.sql.sqltypes.AutoString(length=36), nullable=False),
    sa.Column('unpinned', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('device_id'),
    sqlite_with_rowid=False,
    )
    if op.get_bind().dialect.name != 'sqlite':
        return
    op.execute(
        'INSERT INTO queue_counts (device_id, unpinned)'
        ' SELECT recipient_device_id, count(*) FROM queued_envelopes WHERE tag IS NULL'
        ' GROUP BY recipient_device_id'
    )
    for trigger in TRIGGERS.values():
        op.execute(trigger)


def downgrade() -> None:
    if op.get_bind().dialect.name == 'sqlite':
        for name in TRIGGERS:
            op.execute(f'DROP TRIGGER {name}')
    op.drop_table('queue_counts')
