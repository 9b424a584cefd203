"""account device versions: on SQLite each account's devices, as a send reads them, carry a version
that changes with them (``core.services.account_devices``), so that a send reads one value rather
than every device's row and push registrations (22 rows of nine cells for 22 devices, as much of a
send's cost a device as its queue write's reads, ``bench/CHANGELOG.md``).

Triggers on ``devices`` and ``push_registrations`` give the account a new random version on every
change of what a send reads, in the transaction that makes it; a version is never made twice, so
one set by a transaction that rolled back never matches again. PostgreSQL gets the table, empty: a
group of sends reads its accounts' devices in the statement that locks them.

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-28 12:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_NEW_VERSION = (
    "INSERT INTO account_device_versions (account_id, version) SELECT {account}, hex(randomblob(8))"
    " WHERE {account} IS NOT NULL"
    " ON CONFLICT (account_id) DO UPDATE SET version = excluded.version;"
)
_DEVICE_ACCOUNT = "(SELECT account_id FROM devices WHERE device_id = {row}.device_id)"
# The columns of a device that a send reads (``core.runtime.group_commit.ACCOUNT_DEVICE_COLUMNS``),
# its account and its creation (the order of an account's devices): a change of any other (the
# device's last sight, its battery) leaves the version.
_READ_COLUMNS = (
    "account_id, device_type, surface_kind, public_key, name, created_at, fcm_token, fcm_token_kind"
)
TRIGGERS = {
    "account_device_versions_device_added": f"""
        CREATE TRIGGER account_device_versions_device_added AFTER INSERT ON devices
        BEGIN {_NEW_VERSION.format(account="NEW.account_id")} END""",
    "account_device_versions_device_removed": f"""
        CREATE TRIGGER account_device_versions_device_removed AFTER DELETE ON devices
        BEGIN {_NEW_VERSION.format(account="OLD.account_id")} END""",
    "account_device_versions_device_changed": f"""
        CREATE TRIGGER account_device_versions_device_changed AFTER UPDATE OF {_READ_COLUMNS} ON devices
        BEGIN
            {_NEW_VERSION.format(account="OLD.account_id")}
            {_NEW_VERSION.format(account="NEW.account_id")}
        END""",
    "account_device_versions_registration_added": f"""
        CREATE TRIGGER account_device_versions_registration_added AFTER INSERT ON push_registrations
        BEGIN {_NEW_VERSION.format(account=_DEVICE_ACCOUNT.format(row="NEW"))} END""",
    "account_device_versions_registration_removed": f"""
        CREATE TRIGGER account_device_versions_registration_removed AFTER DELETE ON push_registrations
        BEGIN {_NEW_VERSION.format(account=_DEVICE_ACCOUNT.format(row="OLD"))} END""",
    "account_device_versions_registration_changed": f"""
        CREATE TRIGGER account_device_versions_registration_changed AFTER UPDATE ON push_registrations
        BEGIN
            {_NEW_VERSION.format(account=_DEVICE_ACCOUNT.format(row="OLD"))}
            {_NEW_VERSION.format(account=_DEVICE_ACCOUNT.format(row="NEW"))}
        END""",
}


def upgrade() -> None:
    op.create_table(
        "account_device_versions",
        sa.Column("account_id", sa.String(length=36), nullable=False),
        sa.Column("version", sa.String(length=16), nullable=False),
        sa.PrimaryKeyConstraint("account_id"),
        sqlite_with_rowid=False,
    )
    if op.get_bind().dialect.name == "sqlite":
        op.execute(
            "INSERT INTO account_device_versions (account_id, version)"
            " SELECT account_id, hex(randomblob(8)) FROM devices GROUP BY account_id"
        )
        for trigger in TRIGGERS.values():
            op.execute(trigger)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for name in TRIGGERS:
            op.execute(f"DROP TRIGGER {name}")
    op.drop_table("account_device_versions")
