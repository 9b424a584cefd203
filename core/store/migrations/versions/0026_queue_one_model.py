"""queue, one model: a row a device's entry on SQLite as on PostgreSQL (issue 49). SQLite's packed
rows of migration 0021 are unpacked into a row a device (each with the seq its device was given),
their ``recipients`` column and the counts' ``floor`` go, and each count is taken again. An
account's devices are no longer kept between sends: 0022's triggers and table go.

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-07 20:00:00.000000
"""

from collections.abc import Sequence
from importlib import import_module

import sqlalchemy as sa
from alembic import op

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ONE_ROW_A_SEND = "core.store.migrations.versions.0021_queue_one_row_a_send"
_DEVICE_VERSIONS = "core.store.migrations.versions.0022_account_device_versions"
COUNT = (
    "DELETE FROM queue_counts",
    "INSERT INTO queue_counts (device_id, unpinned, newest)"
    " SELECT recipient_device_id, sum(tag IS NULL), max(seq) FROM queued_envelopes"
    " GROUP BY recipient_device_id",
)


def upgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    if sqlite:
        import_module(_ONE_ROW_A_SEND)._unpack_rows()
        for name in import_module(_DEVICE_VERSIONS).TRIGGERS:
            op.execute(f"DROP TRIGGER {name}")
    # SQLite drops a column in place (3.35 and later): no table rebuilt, so its triggers stay.
    op.execute("ALTER TABLE queue_counts DROP COLUMN floor")
    op.execute("ALTER TABLE queued_envelopes DROP COLUMN recipients")
    op.drop_table("account_device_versions")
    if sqlite:
        for statement in COUNT:
            op.execute(statement)


def downgrade() -> None:
    """Every entry stays a device's own row, which 0021's layout reads as such (floors at 0)."""
    import_module(_DEVICE_VERSIONS).upgrade()
    op.add_column("queued_envelopes", sa.Column("recipients", sa.Text(), nullable=True))
    seq = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
    op.add_column("queue_counts", sa.Column("floor", seq, nullable=False, server_default="0"))
