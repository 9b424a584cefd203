"""queue seqs as bigint: on PostgreSQL a queue entry's seq (and the sequence that hands them out)
was a 32-bit integer, which one sequence shared by every device would exhaust after 2.1 billion
entries: 25 days at 1,000 envelopes a second (docs/scaling.md plans for more). A bigint lasts
beyond any deployment. SQLite's rowid is 64 bits already. The column's change rewrites the table
under an exclusive lock: the queues are short (at most 200 unpinned entries a device), so it takes
moments.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-27 23:00:00.000000
"""

from collections.abc import Sequence

from alembic import op


revision: str = '0019'
down_revision: str | None = '0018'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if op.get_bind().dialect.name == 'postgresql':
        op.execute('ALTER TABLE queued_envelopes ALTER COLUMN seq TYPE bigint')
        op.execute('ALTER SEQUENCE queued_envelopes_seq_seq AS bigint')


def downgrade() -> None:
    if op.get_bind().dialect.name == 'postgresql':
        op.execute('ALTER SEQUENCE queued_envelopes_seq_seq AS integer')
        op.execute('ALTER TABLE queued_envelopes ALTER COLUMN seq TYPE integer')
