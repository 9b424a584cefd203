"""queue entry at cap: on PostgreSQL, a function that walks a device's queue from its newest entry to
the one a write pushes over the cap and answers that entry's address, planned with bitmap and
sequential scans off. Inline in the queue statement, the walk's generic plan became a bitmap scan
of every index entry of the recipient, dead ones included, then a sort, once the table was analyzed
with many dead entries and no vacuum since (401 buffers a send in bench/send.py; ~3,000 after
3,000 writes in tests/core/test_queue_plan_postgres.py). A PL/pgSQL function keeps its plans for
the session, and its SET clause holds for them: the walk stays an index-only scan of the recipient
index, and the entry is then found by its seq in the primary key. STABLE, so it reads the calling
statement's snapshot (from before that statement's insert). SQLite keeps each queue's count
instead (0016) and has nothing to do here.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-27 03:20:00.000000
"""

from collections.abc import Sequence

from alembic import op


revision: str = '0017'
down_revision: str | None = '0016'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FUNCTION = 'relaybox_queue_entry_at_cap'
CREATE = f"""
CREATE FUNCTION {FUNCTION}(for_recipient varchar, kept integer) RETURNS tid
LANGUAGE plpgsql STABLE
SET enable_bitmapscan = off
SET enable_seqscan = off
AS $$
BEGIN
    RETURN (
        SELECT by_seq.ctid FROM queued_envelopes AS by_seq
        WHERE by_seq.seq = (
            SELECT older.seq FROM queued_envelopes AS older
            WHERE older.recipient_device_id BETWEEN for_recipient AND for_recipient AND older.tag IS NULL
            ORDER BY older.recipient_device_id DESC, older.seq DESC
            OFFSET kept LIMIT 1
        )
    );
END
$$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == 'postgresql':
        op.execute(CREATE)


def downgrade() -> None:
    if op.get_bind().dialect.name == 'postgresql':
        op.execute(f'DROP FUNCTION {FUNCTION}(varchar, integer)')
