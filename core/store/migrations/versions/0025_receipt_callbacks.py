"""receipt callbacks: an urgent notification sent through the Pushover shim with a callback URL is
POSTed to it once a device acknowledges it; one row per such receipt holds the URL and the state of
its delivery (due once acknowledged; the claim of the replica sending it, attempts, last outcome)

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-10 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision: str = '0025'
down_revision: str | None = '0024'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('receipt_callbacks',
    sa.Column('receipt_id', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('account_id', sqlmodel.sql.sqltypes.AutoString(length=36), nullable=False),
    sa.Column('url', sqlmodel.sql.sqltypes.AutoString(length=2048), nullable=False),
    sa.Column('due_at', sa.Integer(), nullable=True),
    sa.Column('claim', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('last_status', sa.Integer(), nullable=True),
    sa.Column('last_error', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=True),
    sa.Column('delivered_at', sa.Integer(), nullable=True),
    sa.Column('failed_at', sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(['receipt_id'], ['receipts.receipt_id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('receipt_id')
    )
    with op.batch_alter_table('receipt_callbacks', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_receipt_callbacks_due_at'), ['due_at'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('receipt_callbacks', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_receipt_callbacks_due_at'))
    op.drop_table('receipt_callbacks')
