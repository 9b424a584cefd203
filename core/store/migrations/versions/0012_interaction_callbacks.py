"""interaction callbacks: a question may name an https callback_url, told by a signed POST when it
is answered or expires; one row per such question holds the URL, the event, and the state of its
delivery (the next attempt's time, the claim of the replica sending it, attempts and last outcome)

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision: str = '0012'
down_revision: str | None = '0011'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('interaction_callbacks',
    sa.Column('interaction_id', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('account_id', sqlmodel.sql.sqltypes.AutoString(length=36), nullable=False),
    sa.Column('url', sqlmodel.sql.sqltypes.AutoString(length=2048), nullable=False),
    sa.Column('event', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
    sa.Column('webhook_id', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('due_at', sa.Integer(), nullable=True),
    sa.Column('claim', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('last_status', sa.Integer(), nullable=True),
    sa.Column('last_error', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=True),
    sa.Column('delivered_at', sa.Integer(), nullable=True),
    sa.Column('failed_at', sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(['interaction_id'], ['interactions.interaction_id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('interaction_id')
    )
    with op.batch_alter_table('interaction_callbacks', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_interaction_callbacks_due_at'), ['due_at'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('interaction_callbacks', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_interaction_callbacks_due_at'))
    op.drop_table('interaction_callbacks')
