"""scheduled wake-ups: pushes sent at a set time (a web phone's reminders), ciphertext only

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25 18:10:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision: str = '0008'
down_revision: str | None = '0007'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('scheduled_wake_ups',
    sa.Column('wake_id', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('device_id', sqlmodel.sql.sqltypes.AutoString(length=36), nullable=False),
    sa.Column('due_at', sa.Integer(), nullable=False),
    sa.Column('tag', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('message', sqlmodel.sql.sqltypes.AutoString(length=8192), nullable=False),
    sa.Column('ttl_s', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['device_id'], ['devices.device_id'], ),
    sa.PrimaryKeyConstraint('wake_id')
    )
    with op.batch_alter_table('scheduled_wake_ups', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_scheduled_wake_ups_device_id'), ['device_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_scheduled_wake_ups_due_at'), ['due_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_scheduled_wake_ups_tag'), ['tag'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('scheduled_wake_ups', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_scheduled_wake_ups_tag'))
        batch_op.drop_index(batch_op.f('ix_scheduled_wake_ups_due_at'))
        batch_op.drop_index(batch_op.f('ix_scheduled_wake_ups_device_id'))
    op.drop_table('scheduled_wake_ups')
