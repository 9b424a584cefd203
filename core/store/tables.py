"""SQLModel tables. Times are Unix epoch seconds (integers), as on the wire.

Nothing here holds caller plaintext: no message, question, choice, filename or document text.
Secrets (device credentials, sender tokens) are stored as SHA-256 hex digests only; pairing
codes as an HMAC under the server key (a six-digit code's plain hash would be trivially reversed).
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Index, Integer, LargeBinary, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

# Sends asked for later, sealed per device until their time.
from core.store.scheduled_tables import ScheduledEnvelope as ScheduledEnvelope
from core.store.scheduled_tables import ScheduledNotification as ScheduledNotification

# Who may register a phone: the server's claim and its invites.
from core.store.signup_tables import Invite as Invite
from core.store.signup_tables import ServerClaim as ServerClaim

# What a caller waits on (questions, their callbacks, urgent receipts) has a module of its own;
# its tables are part of this one.
from core.store.waited_tables import Interaction as Interaction
from core.store.waited_tables import InteractionCallback as InteractionCallback
from core.store.waited_tables import Receipt as Receipt
from core.store.waited_tables import ReceiptCallback as ReceiptCallback


class Account(SQLModel, table=True):
    __tablename__ = "accounts"

    account_id: str = Field(primary_key=True, max_length=36)
    created_at: int


class Device(SQLModel, table=True):
    __tablename__ = "devices"

    device_id: str = Field(primary_key=True, max_length=36)
    account_id: str = Field(foreign_key="accounts.account_id", index=True, max_length=36)
    device_type: str = Field(max_length=16)  # extension | android
    surface_kind: str = Field(max_length=16)  # phone | extension | pwa | cli | desktop
    public_key: str = Field(max_length=64)  # standard base64 of 32 bytes
    name: str = Field(default="", max_length=64)
    credential_hash: str = Field(unique=True, max_length=64)
    created_at: int
    last_seen_at: int | None = None
    app_build: int | None = None
    fcm_token: str | None = Field(default=None, max_length=4096)
    fcm_token_kind: str | None = Field(default=None, max_length=8)  # token | fid
    ever_paired: int = 0
    ever_drained: int = 0
    battery_percent: int | None = None
    charging: bool | None = None
    ringer: str | None = Field(default=None, max_length=16)
    network: str | None = Field(default=None, max_length=16)
    status_reported_at: int | None = None


class RegistrationChallenge(SQLModel, table=True):
    """An FCM registration waiting to be proved by the phone echoing a ``reg_challenge`` push."""

    __tablename__ = "registration_challenges"

    registration_id: str = Field(primary_key=True, max_length=40)
    device_id: str = Field(foreign_key="devices.device_id", index=True, max_length=36)
    nonce_hash: str = Field(max_length=64)
    fcm_token: str = Field(max_length=4096)
    fcm_token_kind: str = Field(max_length=8)
    expires_at: int


class PushRegistration(SQLModel, table=True):
    """A device's registration with one push service other than FCM (whose token waits for its
    proof in ``registration_challenges`` and then lives on the device row): the JSON object of the
    text fields that service's registration model validated, e.g. a web-push subscription's
    endpoint and keys (``core.adapters.push.base.PushSender.registration``)."""

    __tablename__ = "push_registrations"

    device_id: str = Field(primary_key=True, foreign_key="devices.device_id", max_length=36)
    service: str = Field(primary_key=True, max_length=32)  # the sender's name: web_push, ...
    registration: str = Field(sa_column=Column(Text, nullable=False))
    created_at: int


class Pair(SQLModel, table=True):
    __tablename__ = "pairs"
    __table_args__ = (UniqueConstraint("phone_device_id", "device_id"),)

    pair_id: str = Field(primary_key=True, max_length=40)
    account_id: str = Field(foreign_key="accounts.account_id", index=True, max_length=36)
    phone_device_id: str = Field(foreign_key="devices.device_id", index=True, max_length=36)
    device_id: str = Field(foreign_key="devices.device_id", index=True, max_length=36)
    created_at: int
    updated_at: int


class PairingCode(SQLModel, table=True):
    """A live six-digit code and the computer identity that will be created when it is redeemed."""

    __tablename__ = "pairing_codes"

    code_digest: str = Field(primary_key=True, max_length=64)
    expires_at: int = Field(index=True)
    created_at: int
    intent: str = Field(default="pair", max_length=16)
    device_id: str = Field(unique=True, max_length=36)
    credential_hash: str = Field(unique=True, max_length=64)
    public_key: str = Field(max_length=64)
    surface_kind: str = Field(max_length=16)
    device_type: str = Field(max_length=16)
    name: str = Field(default="", max_length=64)


class PairResult(SQLModel, table=True):
    """What the computer collects after the phone confirmed its code; kept 24 hours."""

    __tablename__ = "pair_results"

    device_id: str = Field(primary_key=True, max_length=36)
    pair_id: str = Field(max_length=40)
    phone_device_id: str = Field(max_length=36)
    phone_name: str = Field(default="", max_length=64)
    phone_public_key: str = Field(max_length=64)
    expires_at: int = Field(index=True)


class SenderToken(SQLModel, table=True):
    """A sender token (hash only). A revoked row is the revocation audit, removed after 30 days."""

    __tablename__ = "sender_tokens"

    token_id: str = Field(primary_key=True, max_length=40)
    account_id: str = Field(foreign_key="accounts.account_id", index=True, max_length=36)
    token_hash: str = Field(unique=True, max_length=64)
    label: str = Field(max_length=64)
    scope: str | None = Field(default=None, max_length=32)
    priority_cap: str = Field(default="urgent", max_length=8)
    created_at: int
    created_by_device_id: str | None = Field(default=None, max_length=36)
    last_used_at: int | None = None
    revoked_at: int | None = Field(default=None, index=True)
    revoked_by_device_id: str | None = Field(default=None, max_length=36)


class QueuedEnvelope(SQLModel, table=True):
    """One opaque blob waiting for its recipient device, ordered by ``seq``."""

    __tablename__ = "queued_envelopes"
    __table_args__ = (
        # The one index by recipient: a stream's reads (seq order) and each enqueue's newest seq and
        # 200th newest unpinned entry, found in the index alone (it holds the tag, so SQLite skips
        # pinned entries without reading their rows). One index, not one by recipient beside one of
        # unpinned entries: each entry written or trimmed updates one index page less.
        Index("ix_queued_envelopes_recipient_seq", "recipient_device_id", "seq", "tag"),
        {"sqlite_autoincrement": True},  # a seq is never handed out twice
    )

    # 64 bits on PostgreSQL (migration 0019): one sequence serves every device. On SQLite the
    # column must be spelled INTEGER to be the rowid, which is 64 bits already.
    seq: int | None = Field(
        default=None, sa_column=Column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    )
    recipient_device_id: str = Field(max_length=36)
    sender: str = Field(max_length=36)  # a device id, or "server"
    type: str = Field(max_length=32)
    blob: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    created_at: int
    expires_at: int = Field(index=True)
    # A keyed digest naming what a pinned entry is about (a reminder's id): pinned entries are
    # never trimmed to the newest 200, and a later entry can find the earlier one (a cancel, its set).
    tag: str | None = Field(default=None, max_length=64)
    # SQLite: a send to several devices is one row (``core.queue._packed``): keyed by its account's
    # id in ``recipient_device_id``, this JSON object names each recipient and its seq, and ``blob``
    # holds their blobs in that order. NULL on a device's own row (and on PostgreSQL).
    recipients: str | None = Field(default=None, sa_column=Column(Text))


class QueueCount(SQLModel, table=True):
    """SQLite only: how many unpinned entries a device's queue holds, its floor (its packed entries
    below it are trimmed) and the newest seq it was handed, kept by the queue's statements
    (``core.queue._counts`` lists them) and two triggers of migration 0016 (an entry's pin or
    recipient changed; the row dropped with its device). A migration that rebuilds
    ``queued_envelopes`` on SQLite drops its trigger: it must create it again. PostgreSQL leaves
    it empty."""

    __tablename__ = "queue_counts"
    __table_args__ = {"sqlite_with_rowid": False}  # the count beside its key: one b-tree, one seek

    device_id: str = Field(primary_key=True, max_length=36)
    unpinned: int
    floor: int = Field(
        default=0,
        sa_column=Column(BigInteger().with_variant(Integer, "sqlite"), nullable=False, server_default="0"),
    )
    newest: int | None = Field(default=None, sa_column=Column(BigInteger().with_variant(Integer, "sqlite")))


class ParkedDocument(SQLModel, table=True):
    """A document for the phone, as ciphertext only (filename and content are inside), until pulled."""

    __tablename__ = "parked_documents"

    document_id: str = Field(primary_key=True, max_length=40)
    account_id: str = Field(foreign_key="accounts.account_id", index=True, max_length=36)
    phone_device_id: str = Field(max_length=36)
    blob: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    byte_length: int
    expires_at: int = Field(index=True)


class ParkedAttachment(SQLModel, table=True):
    """A notification's attachment as ciphertext only (``secretbox-v1``; the key, name and type
    travel inside each device's notification envelope), until it expires."""

    __tablename__ = "parked_attachments"

    attachment_id: str = Field(primary_key=True, max_length=40)
    account_id: str = Field(foreign_key="accounts.account_id", index=True, max_length=36)
    blob: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    byte_length: int  # of the blob, counted against the account's quota
    expires_at: int = Field(index=True)


class ScheduledWakeUp(SQLModel, table=True):
    """A push to send at a set time (a web phone's reminder, which a closed browser cannot time
    itself), or every ``repeat_s`` until ``repeat_until`` (an urgent notification until it is
    acknowledged): the push message holds its content only as an envelope sealed to the device."""

    __tablename__ = "scheduled_wake_ups"

    wake_id: str = Field(primary_key=True, max_length=40)
    device_id: str = Field(foreign_key="devices.device_id", index=True, max_length=36)
    due_at: int = Field(index=True)
    tag: str = Field(index=True, max_length=64)  # a reminder's tag, a receipt's id: found by this
    message: str = Field(max_length=8192)  # the push message's JSON (type and fields)
    ttl_s: int
    repeat_s: int | None = None
    repeat_until: int | None = None


class ConsentSession(SQLModel, table=True):
    """An authorization request waiting for its person: the six-digit code shown on the consent
    page (as an HMAC digest, in the pairing-code namespace), confirmed by a phone, which decides
    the account, then decided once on the page. The request itself is opaque to the core."""

    __tablename__ = "consent_sessions"

    session_id: str = Field(primary_key=True, max_length=40)
    code_digest: str | None = Field(default=None, unique=True, max_length=64)  # cleared once confirmed
    client_id: str = Field(max_length=512)
    client_name: str = Field(max_length=128)
    request_params: str = Field(max_length=8192)
    browser_digest: str = Field(max_length=64)
    csrf_digest: str = Field(max_length=64)
    created_at: int
    expires_at: int = Field(index=True)
    confirmed_at: int | None = None
    account_id: str | None = Field(default=None, foreign_key="accounts.account_id", max_length=36)
    phone_device_id: str | None = Field(default=None, max_length=36)
    decided_at: int | None = None


class ConnectorGrant(SQLModel, table=True):
    """One consent given to a connector client (an AI assistant): its scopes and audience. Its
    tokens live with the authorization server; revoking the grant ends all of them at once."""

    __tablename__ = "connector_grants"

    grant_id: str = Field(primary_key=True, max_length=40)
    account_id: str = Field(foreign_key="accounts.account_id", index=True, max_length=36)
    client_id: str = Field(max_length=512)
    client_name: str = Field(max_length=128)
    scopes: str = Field(max_length=256)  # space-separated, in the order of CONNECTOR_SCOPES
    resource: str = Field(max_length=512)
    created_at: int
    last_used_at: int | None = None
    revoked_at: int | None = Field(default=None, index=True)


class FileTransfer(SQLModel, table=True):
    """A file on its way between two paired devices. The server knows only the chunk layout and
    who may read and write it; name, content and keys travel inside ``file_ctrl`` envelopes. Its
    objects (``<transfer_id>/<index>``) are deleted with the row: on cancel, decline, completion
    or expiry."""

    __tablename__ = "file_transfers"

    transfer_id: str = Field(primary_key=True, max_length=40)
    account_id: str = Field(foreign_key="accounts.account_id", index=True, max_length=36)
    sender_device_id: str = Field(max_length=36)
    recipient_device_id: str = Field(max_length=36)
    size: int = Field(sa_type=BigInteger)  # ciphertext bytes of all chunks; counts against the quota
    chunk_size: int  # ciphertext bytes of every chunk but the last
    chunk_count: int
    created_at: int
    expires_at: int = Field(index=True)
