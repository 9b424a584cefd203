"""parked attachments: a notification's file, as one ciphertext whose key only its devices hold

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25 00:10:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision: str = '0007'
down_revision: str | None = '0006'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('parked_attachments',
    sa.Column('attachment_id', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('account_id', sqlmodel.sql.sqltypes.AutoString(length=36), nullable=False),
    sa.Column('blob', sa.LargeBinary(), nullable=False),
    sa.Column('byte_length', sa.Integer(), nullable=False),
    sa.Column('expires_at', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['account_id'], ['accounts.account_id'], ),
    sa.PrimaryKeyConstraint('attachment_id')
    )
    with op.batch_alter_table('parked_attachments', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_parked_attachments_account_id'), ['account_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_parked_attachments_expires_at'), ['expires_at'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('parked_attachments', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_parked_attachments_expires_at'))
        batch_op.drop_index(batch_op.f('ix_parked_attachments_account_id'))
    op.drop_table('parked_attachments')
