"""The tables of what a caller waits on: questions put to the phone (``Interaction``), their answer
callbacks (``InteractionCallback``), urgent notifications' receipts (``Receipt``) and their
acknowledgement callbacks (``ReceiptCallback``). Part of
``core.store.tables``, which re-exports them (the rules there hold here: no caller plaintext).
"""

from __future__ import annotations

from sqlalchemy import Column, LargeBinary, Text
from sqlmodel import Field, SQLModel


class Interaction(SQLModel, table=True):
    """A question put to the phone. Its text and choices are never stored: only a keyed digest
    used to recognise a duplicate request, and how many choices there were. A typed reply waits in
    ``answer_text`` sealed at rest (``core.services.typed_replies``) until the caller's first read
    takes it; ``text_read_at`` then says it was handed over."""

    __tablename__ = "interactions"

    interaction_id: str = Field(primary_key=True, max_length=40)
    account_id: str = Field(foreign_key="accounts.account_id", index=True, max_length=36)
    owner: str = Field(max_length=48)
    dedupe_digest: str = Field(index=True, max_length=64)
    choice_count: int
    created_at: int
    expires_at: int = Field(index=True)
    choice_index: int | None = None
    answered_at: int | None = None
    text_max_chars: int | None = None  # None: the question takes no typed reply
    answer_text: bytes | None = Field(default=None, sa_column=Column(LargeBinary, nullable=True))
    text_read_at: int | None = None


class InteractionCallback(SQLModel, table=True):
    """A question's answer callback (``core.services.callbacks``): the caller's https URL and the
    event it will be told of, ``expired`` until the answer makes it ``answered``. ``due_at`` is when
    its next attempt may start (NULL once delivered or given up); a replica claims an attempt by
    moving it a lease ahead under a fresh ``claim``. Neither the body sent nor its signing secret is
    kept: each attempt builds them from the interaction and the server key."""

    __tablename__ = "interaction_callbacks"

    interaction_id: str = Field(
        primary_key=True, foreign_key="interactions.interaction_id", ondelete="CASCADE", max_length=40
    )
    account_id: str = Field(max_length=36)
    url: str = Field(max_length=2048)
    event: str = Field(max_length=16)  # expired | answered
    webhook_id: str = Field(max_length=40)  # the event's webhook-id, the same on every retry
    due_at: int | None = Field(default=None, index=True)
    claim: str | None = Field(default=None, max_length=40)
    attempts: int = 0
    last_status: int | None = None  # the receiver's last HTTP status
    last_error: str | None = Field(default=None, max_length=32)
    delivered_at: int | None = None
    failed_at: int | None = None  # retries ran out


class Receipt(SQLModel, table=True):
    """An urgent notification that repeats until acknowledged: who may ask about it, the devices
    it went to, and its state (never its text). Swept a day after it expires."""

    __tablename__ = "receipts"

    receipt_id: str = Field(primary_key=True, max_length=40)
    account_id: str = Field(foreign_key="accounts.account_id", index=True, max_length=36)
    owner: str | None = Field(default=None, max_length=48)  # its sender (Principal.owner_key)
    msg_id: str = Field(max_length=40)
    device_ids: str = Field(sa_column=Column(Text, nullable=False))  # comma list of its recipients
    repeat_s: int
    created_at: int
    expires_at: int = Field(index=True)
    acknowledged_at: int | None = None
    acknowledged_by: str | None = Field(default=None, max_length=36)  # a device id
    cancelled_at: int | None = None


class ReceiptCallback(SQLModel, table=True):
    """An urgent notification's acknowledgement callback (Pushover's ``callback``,
    ``core.services.receipt_callbacks``): the caller's https URL, due (``due_at``) once a device
    acknowledges; claimed, retried and given up as a question's callback is. The body is built
    from the receipt at each attempt."""

    __tablename__ = "receipt_callbacks"

    receipt_id: str = Field(
        primary_key=True, foreign_key="receipts.receipt_id", ondelete="CASCADE", max_length=40
    )
    account_id: str = Field(max_length=36)
    url: str = Field(max_length=2048)
    due_at: int | None = Field(default=None, index=True)
    claim: str | None = Field(default=None, max_length=40)
    attempts: int = 0
    last_status: int | None = None
    last_error: str | None = Field(default=None, max_length=32)
    delivered_at: int | None = None
    failed_at: int | None = None
