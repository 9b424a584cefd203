"""signup and sender scopes: who may register a phone (the server's claim by its first phone, and
single-use invites kept as digests), and the sender that owns each urgent receipt.

A server that already has a phone is claimed by its earliest one, so that switching to
``RELAYBOX_REGISTRATION=invite`` does not let the next stranger claim it. Receipts written before
this have no owner; any sender of their account may still read them until they are swept (a day
after they expire).

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-04 12:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "server_claims",
        sa.Column("claim_id", sa.String(length=16), nullable=False),
        sa.Column("device_id", sa.String(length=36), nullable=False),
        sa.Column("claimed_at", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("claim_id"),
    )
    op.execute(
        "INSERT INTO server_claims (claim_id, device_id, claimed_at)"
        " SELECT 'server', device_id, created_at FROM devices WHERE surface_kind = 'phone'"
        " ORDER BY created_at, device_id LIMIT 1"
    )
    op.create_table(
        "invites",
        sa.Column("invite_hash", sa.String(length=64), nullable=False),
        sa.Column("account_id", sa.String(length=36), nullable=True),
        sa.Column("created_at", sa.Integer(), nullable=False),
        sa.Column("expires_at", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("invite_hash"),
    )
    op.create_index("ix_invites_account_id", "invites", ["account_id"])
    op.create_index("ix_invites_expires_at", "invites", ["expires_at"])
    with op.batch_alter_table("receipts") as batch:
        batch.add_column(sa.Column("owner", sa.String(length=48), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("receipts") as batch:
        batch.drop_column("owner")
    op.drop_index("ix_invites_expires_at", table_name="invites")
    op.drop_index("ix_invites_account_id", table_name="invites")
    op.drop_table("invites")
    op.drop_table("server_claims")
