"""The tables of scheduled delivery (``core.services.scheduled``): a send asked for later, kept
only as envelopes sealed to each of its devices until its time. Part of ``core.store.tables``,
which re-exports them (the rules there hold here: no caller plaintext).
"""

from __future__ import annotations

from sqlalchemy import Column, LargeBinary
from sqlmodel import Field, SQLModel


class ScheduledNotification(SQLModel, table=True):
    """A notification to deliver at ``deliver_at``: who sent it (``sender``, a ``tok_…`` or
    ``grt_…``, with its ``sequence_id``, by which that sender cancels or replaces it) and how it is
    queued then; its content is only in its ``ScheduledEnvelope`` rows."""

    __tablename__ = "scheduled_notifications"

    scheduled_id: str = Field(primary_key=True, max_length=40)  # the send's msg_ id
    account_id: str = Field(foreign_key="accounts.account_id", index=True, max_length=36)
    sender: str = Field(max_length=48)
    sequence_id: str = Field(max_length=64)
    deliver_at: int = Field(index=True)
    created_at: int
    ttl_s: int
    high_priority: bool


class ScheduledEnvelope(SQLModel, table=True):
    """A scheduled notification sealed to one device; goes with its notification. A device removed
    meanwhile is skipped when it is delivered: no foreign key to it, so that removing a device
    never waits on a delivery's locks (an envelope to a removed device opens for nobody)."""

    __tablename__ = "scheduled_envelopes"

    scheduled_id: str = Field(
        primary_key=True,
        foreign_key="scheduled_notifications.scheduled_id",
        ondelete="CASCADE",
        max_length=40,
    )
    device_id: str = Field(primary_key=True, max_length=36)
    blob: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
