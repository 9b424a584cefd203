"""shared secrets: a secret every replica must share that nobody configured (the web push VAPID
key), made by the first replica to start and kept here, sealed with a key derived from the server
key (``core.store.shared_secrets``, ``core.adapters.push.vapid_key``).

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-01 12:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "shared_secrets",
        sa.Column("name", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("value", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )


def downgrade() -> None:
    op.drop_table("shared_secrets")
