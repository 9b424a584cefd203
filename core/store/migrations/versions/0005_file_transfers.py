"""file transfers

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-21 13:50:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision: str = '0005'
down_revision: str | None = '0004'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('file_transfers',
    sa.Column('transfer_id', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('account_id', sqlmodel.sql.sqltypes.AutoString(length=36), nullable=False),
    sa.Column('sender_device_id', sqlmodel.sql.sqltypes.AutoString(length=36), nullable=False),
    sa.Column('recipient_device_id', sqlmodel.sql.sqltypes.AutoString(length=36), nullable=False),
    sa.Column('size', sa.BigInteger(), nullable=False),
    sa.Column('chunk_size', sa.Integer(), nullable=False),
    sa.Column('chunk_count', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.Integer(), nullable=False),
    sa.Column('expires_at', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['account_id'], ['accounts.account_id'], ),
    sa.PrimaryKeyConstraint('transfer_id')
    )
    with op.batch_alter_table('file_transfers', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_file_transfers_account_id'), ['account_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_file_transfers_expires_at'), ['expires_at'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('file_transfers', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_file_transfers_expires_at'))
        batch_op.drop_index(batch_op.f('ix_file_transfers_account_id'))

    op.drop_table('file_transfers')
