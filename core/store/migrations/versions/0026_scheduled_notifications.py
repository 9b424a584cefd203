"""scheduled notifications: a send asked for later (``delay``, ``at``, ntfy's ``Delay``/``At``/``In``)
is kept until its time as one row saying when and by whom, and one envelope sealed to each of its
devices (never its text); both go when it is delivered or cancelled

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-07 19:45:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "scheduled_notifications",
        sa.Column("scheduled_id", sa.String(length=40), nullable=False),
        sa.Column("account_id", sa.String(length=36), nullable=False),
        sa.Column("sender", sa.String(length=48), nullable=False),
        sa.Column("sequence_id", sa.String(length=64), nullable=False),
        sa.Column("deliver_at", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.Integer(), nullable=False),
        sa.Column("ttl_s", sa.Integer(), nullable=False),
        sa.Column("high_priority", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["account_id"], ["accounts.account_id"]),
        sa.PrimaryKeyConstraint("scheduled_id"),
    )
    op.create_index("ix_scheduled_notifications_account_id", "scheduled_notifications", ["account_id"])
    op.create_index("ix_scheduled_notifications_deliver_at", "scheduled_notifications", ["deliver_at"])
    op.create_table(
        "scheduled_envelopes",
        sa.Column("scheduled_id", sa.String(length=40), nullable=False),
        sa.Column("device_id", sa.String(length=36), nullable=False),
        sa.Column("blob", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["scheduled_id"], ["scheduled_notifications.scheduled_id"], ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("scheduled_id", "device_id"),
    )


def downgrade() -> None:
    op.drop_table("scheduled_envelopes")
    op.drop_index("ix_scheduled_notifications_deliver_at", table_name="scheduled_notifications")
    op.drop_index("ix_scheduled_notifications_account_id", table_name="scheduled_notifications")
    op.drop_table("scheduled_notifications")
