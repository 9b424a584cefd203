"""queue trimmed at commit: on PostgreSQL, a transaction trims each queue it wrote once, before it
commits, instead of each queue write dropping the entry at the cap itself. The walk from the newest
entry to the cap (fetching each of the 200 from the heap) is then made once a queue a transaction:
a group of sends to one account makes it once, not once a send. This function replaces 0017's (the
entry at the cap) with the entries over it: ``written`` names the recipient of each unpinned entry
the transaction wrote; for each recipient it walks its unpinned entries from the newest, skips the
``kept`` newest and answers the addresses of as many more as the transaction wrote to it (no
further: past them lie the entries trimmed since the last vacuum), found by their seqs in the
primary key. Planned as 0017's was, with bitmap and sequential scans off (that migration says why),
and once (a generic plan): on an analyzed table PL/pgSQL kept making a custom plan a call, which
doubled the call's cost (two queues after 3,000 writes: 230-265 µs of PostgreSQL's CPU a call
against 115-125). STABLE, so it reads the calling statement's snapshot.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-27 20:30:00.000000
"""

from collections.abc import Sequence
from importlib import import_module

from alembic import op


revision: str = '0018'
down_revision: str | None = '0017'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FUNCTION = 'relaybox_queue_entries_over_cap'
CREATE = f"""
CREATE FUNCTION {FUNCTION}(written varchar[], kept integer) RETURNS tid[]
LANGUAGE plpgsql STABLE
SET enable_bitmapscan = off
SET enable_seqscan = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN ARRAY(
        SELECT by_seq.ctid
        FROM (
            SELECT recipient, count(*) AS entries FROM unnest(written) AS recipient GROUP BY recipient
        ) AS queue
        CROSS JOIN LATERAL (
            SELECT older.seq FROM queued_envelopes AS older
            WHERE older.recipient_device_id BETWEEN queue.recipient AND queue.recipient
                AND older.tag IS NULL
            ORDER BY older.recipient_device_id DESC, older.seq DESC
            OFFSET kept LIMIT queue.entries
        ) AS over_cap
        JOIN queued_envelopes AS by_seq ON by_seq.seq = over_cap.seq
    );
END
$$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == 'postgresql':
        op.execute(CREATE)
        op.execute('DROP FUNCTION relaybox_queue_entry_at_cap(varchar, integer)')


def downgrade() -> None:
    if op.get_bind().dialect.name == 'postgresql':
        entry_at_cap = import_module('core.store.migrations.versions.0017_queue_entry_at_cap')
        op.execute(entry_at_cap.CREATE)  # 0017's function, as that migration made it
        op.execute(f'DROP FUNCTION {FUNCTION}(varchar[], integer)')
