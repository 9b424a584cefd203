"""push registrations: one table for every push service's registration (service name and the JSON
of its fields) instead of a table per service; web-push subscriptions move into it as "web_push"

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26 10:00:00.000000
"""

import json
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision: str = '0010'
down_revision: str | None = '0009'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

WEB_PUSH = 'web_push'
SUBSCRIPTION_FIELDS = ('endpoint', 'p256dh', 'auth')


def _push_registrations() -> sa.Table:
    return op.create_table('push_registrations',
    sa.Column('device_id', sqlmodel.sql.sqltypes.AutoString(length=36), nullable=False),
    sa.Column('service', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
    sa.Column('registration', sa.Text(), nullable=False),
    sa.Column('created_at', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['device_id'], ['devices.device_id'], ),
    sa.PrimaryKeyConstraint('device_id', 'service')
    )


def _web_push_subscriptions() -> sa.Table:
    return op.create_table('web_push_subscriptions',
    sa.Column('device_id', sqlmodel.sql.sqltypes.AutoString(length=36), nullable=False),
    sa.Column('endpoint', sqlmodel.sql.sqltypes.AutoString(length=2048), nullable=False),
    sa.Column('p256dh', sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
    sa.Column('auth', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('created_at', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['device_id'], ['devices.device_id'], ),
    sa.PrimaryKeyConstraint('device_id')
    )


def _table(name: str, *columns: str) -> sa.TableClause:
    return sa.table(name, *(sa.column(column) for column in columns))


def upgrade() -> None:
    registrations = _push_registrations()
    old = _table('web_push_subscriptions', 'device_id', *SUBSCRIPTION_FIELDS, 'created_at')
    rows = op.get_bind().execute(sa.select(old)).mappings().all()
    if rows:
        op.bulk_insert(registrations, [
            {
                'device_id': row['device_id'],
                'service': WEB_PUSH,
                # As the service stores a registration: the model's fields, compact JSON.
                'registration': json.dumps(
                    {field: row[field] for field in SUBSCRIPTION_FIELDS}, separators=(',', ':')
                ),
                'created_at': row['created_at'],
            }
            for row in rows
        ])
    op.drop_table('web_push_subscriptions')


def downgrade() -> None:
    # Only web push had a table of its own: other services' registrations are dropped.
    subscriptions = _web_push_subscriptions()
    new = _table('push_registrations', 'device_id', 'service', 'registration', 'created_at')
    rows = op.get_bind().execute(sa.select(new).where(new.c.service == WEB_PUSH)).mappings().all()
    if rows:
        op.bulk_insert(subscriptions, [
            {
                'device_id': row['device_id'],
                **json.loads(row['registration']),
                'created_at': row['created_at'],
            }
            for row in rows
        ])
    op.drop_table('push_registrations')
