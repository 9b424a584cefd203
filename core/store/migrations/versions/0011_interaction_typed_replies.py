"""interaction typed replies: a question may take a typed reply of at most text_max_chars
characters; the reply waits sealed at rest in answer_text until the caller's first read takes it,
and text_read_at records that it was handed over

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0011'
down_revision: str | None = '0010'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('interactions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('text_max_chars', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('answer_text', sa.LargeBinary(), nullable=True))
        batch_op.add_column(sa.Column('text_read_at', sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('interactions', schema=None) as batch_op:
        batch_op.drop_column('text_read_at')
        batch_op.drop_column('answer_text')
        batch_op.drop_column('text_max_chars')
