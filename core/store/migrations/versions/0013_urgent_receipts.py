"""urgent receipts: an urgent notification that repeats until acknowledged keeps a receipt (its
recipients and state, never its text), and a scheduled wake-up may repeat (a closed web phone is
pushed the notification again every repeat_s until repeat_until)

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-26 00:10:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision: str = '0013'
down_revision: str | None = '0012'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('receipts',
    sa.Column('receipt_id', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('account_id', sqlmodel.sql.sqltypes.AutoString(length=36), nullable=False),
    sa.Column('msg_id', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('device_ids', sa.Text(), nullable=False),
    sa.Column('repeat_s', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.Integer(), nullable=False),
    sa.Column('expires_at', sa.Integer(), nullable=False),
    sa.Column('acknowledged_at', sa.Integer(), nullable=True),
    sa.Column('acknowledged_by', sqlmodel.sql.sqltypes.AutoString(length=36), nullable=True),
    sa.Column('cancelled_at', sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(['account_id'], ['accounts.account_id'], ),
    sa.PrimaryKeyConstraint('receipt_id')
    )
    with op.batch_alter_table('receipts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_receipts_account_id'), ['account_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_receipts_expires_at'), ['expires_at'], unique=False)
    with op.batch_alter_table('scheduled_wake_ups', schema=None) as batch_op:
        batch_op.add_column(sa.Column('repeat_s', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('repeat_until', sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('scheduled_wake_ups', schema=None) as batch_op:
        batch_op.drop_column('repeat_until')
        batch_op.drop_column('repeat_s')
    with op.batch_alter_table('receipts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_receipts_expires_at'))
        batch_op.drop_index(batch_op.f('ix_receipts_account_id'))
    op.drop_table('receipts')
