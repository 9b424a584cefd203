"""A device's local state: its keys, credential, server and paired devices, kept in a private
JSON file by ``client.state_file``."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

from client.state_file import ROLES as ROLES  # where the state's roles are defined, below it
from client.state_file import Role as Role
from client.state_file import write_state
from core.domain.keys import KEY_LENGTH, InvalidPublicKey, b64encode, decode_public_key, public_key_of
from core.domain.safety import safety_number

STATE_VERSION = 1


class ClientError(Exception):
    """An error the command line reports as ``error: <code>: <message>``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class StateError(ClientError):
    """The state file is missing, unreadable, malformed or of the other role."""


@dataclass(frozen=True)
class Peer:
    """A device this one is paired with."""

    name: str
    surface_kind: str
    public_key: str
    pair_id: str

    @property
    def public_key_bytes(self) -> bytes:
        return decode_public_key(self.public_key)


@dataclass(frozen=True)
class PendingPairing:
    """A pairing code this computer is waiting on."""

    code: str
    expires_at: int


@dataclass(frozen=True)
class Paired:
    """The outcome of a pairing, on either side: the new peer and the number both screens show."""

    peer_id: str
    peer: Peer
    safety_number: str
    intent: str = "pair"


class Enrolment(Protocol):
    """What the server answers when it creates a device (a phone's registration, a pairing start)."""

    @property
    def device_id(self) -> str: ...

    @property
    def device_token(self) -> str: ...

    @property
    def server_public_key(self) -> str: ...


@dataclass
class DeviceState:
    """Everything a device keeps between runs. ``repr`` never shows the credential or the secret key."""

    server: str
    role: Role
    device_id: str
    device_token: str = field(repr=False)
    secret_key: str = field(repr=False)
    public_key: str
    server_public_key: str
    name: str
    account_id: str | None = None
    peers: dict[str, Peer] = field(default_factory=dict)
    pending: PendingPairing | None = None

    @classmethod
    def enrolled(
        cls,
        server: str,
        role: Role,
        keys: tuple[bytes, bytes],
        answer: Enrolment,
        *,
        name: str,
        account_id: str | None = None,
        pending: PendingPairing | None = None,
    ) -> DeviceState:
        """A new device's state: its key pair (secret, public) and what the server answered."""
        secret, public = keys
        return cls(
            server=server,
            role=role,
            device_id=answer.device_id,
            device_token=answer.device_token,
            secret_key=b64encode(secret),
            public_key=b64encode(public),
            server_public_key=answer.server_public_key,
            name=name,
            account_id=account_id,
            pending=pending,
        )

    @property
    def secret_key_bytes(self) -> bytes:
        return base64.b64decode(self.secret_key, validate=True)

    @property
    def public_key_bytes(self) -> bytes:
        return decode_public_key(self.public_key)

    def safety_number_with(self, peer_id: str) -> str:
        """The 60-digit safety number of this device and the paired device ``peer_id``."""
        return safety_number(self.public_key_bytes, self.peers[peer_id].public_key_bytes)

    def add_peer(self, peer_id: str, peer: Peer) -> Paired:
        """Remember a newly paired device and return the pairing outcome."""
        self.peers[peer_id] = peer
        return Paired(peer_id=peer_id, peer=peer, safety_number=self.safety_number_with(peer_id))

    def to_json(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "server": self.server,
            "role": self.role,
            "device_id": self.device_id,
            "device_token": self.device_token,
            "secret_key": self.secret_key,
            "public_key": self.public_key,
            "server_public_key": self.server_public_key,
            "name": self.name,
            "account_id": self.account_id,
            "peers": {
                peer_id: {
                    "name": peer.name,
                    "surface_kind": peer.surface_kind,
                    "public_key": peer.public_key,
                    "pair_id": peer.pair_id,
                }
                for peer_id, peer in self.peers.items()
            },
            "pending": (
                None
                if self.pending is None
                else {"code": self.pending.code, "expires_at": self.pending.expires_at}
            ),
        }

    @classmethod
    def from_json(cls, data: object) -> DeviceState:
        """Parse and check the JSON form; raises ``ValueError`` naming the first bad field."""
        obj = _mapping(data, "state")
        if obj.get("version") != STATE_VERSION:
            raise ValueError(f"unsupported state version {obj.get('version')!r}")
        role = _text(obj, "role")
        if role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}")
        secret_key = _text(obj, "secret_key")
        try:
            if len(base64.b64decode(secret_key, validate=True)) != KEY_LENGTH:
                raise ValueError("secret_key must be 32 bytes")
        except binascii.Error as exc:
            raise ValueError("secret_key is not base64") from exc
        public_key = _key(obj, "public_key")
        if public_key_of(base64.b64decode(secret_key)) != decode_public_key(public_key):
            raise ValueError("public_key does not belong to secret_key")
        peers = {
            peer_id: Peer(
                name=_text(peer, "name"),
                surface_kind=_text(peer, "surface_kind"),
                public_key=_key(peer, "public_key"),
                pair_id=_text(peer, "pair_id"),
            )
            for peer_id, raw in _mapping(obj.get("peers", {}), "peers").items()
            for peer in (_mapping(raw, f"peers.{peer_id}"),)
        }
        pending_raw = obj.get("pending")
        pending = None
        if pending_raw is not None:
            pending_obj = _mapping(pending_raw, "pending")
            expires_at = pending_obj.get("expires_at")
            if not isinstance(expires_at, int) or isinstance(expires_at, bool):
                raise ValueError("pending.expires_at must be an integer")
            pending = PendingPairing(code=_text(pending_obj, "code"), expires_at=expires_at)
        account_id = obj.get("account_id")
        if account_id is not None and not isinstance(account_id, str):
            raise ValueError("account_id must be a string")
        return cls(
            server=_text(obj, "server"),
            role=role,
            device_id=_text(obj, "device_id"),
            device_token=_text(obj, "device_token"),
            secret_key=secret_key,
            public_key=public_key,
            server_public_key=_key(obj, "server_public_key"),
            name=_text(obj, "name", allow_empty=True),
            account_id=account_id,
            peers=peers,
            pending=pending,
        )

    @classmethod
    def load(cls, path: Path, *, role: Role | None = None) -> DeviceState:
        """Read the state at ``path``; with ``role``, refuse a file of the other role."""
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError as exc:
            raise StateError("no_state", f"no device state at {path}") from exc
        except OSError as exc:
            raise StateError("state_unreadable", f"cannot read {path}: {exc.strerror}") from exc
        try:
            state = cls.from_json(json.loads(text))
        except ValueError as exc:  # json.JSONDecodeError is a ValueError too
            raise StateError("invalid_state", f"{path} is not a relaybox device state: {exc}") from exc
        if role is not None and state.role != role:
            raise StateError("wrong_role", f"{path} holds a {state.role}, not a {role}")
        return state

    def save(self, path: Path) -> None:
        """Write the state atomically with mode 0600 (see ``write_private``).

        Fields that other parts of the client keep in the same file (``last_seq``, the phone's armed
        ``reminders``) are carried over when the file holds this same device; a new device starts
        without them.
        """
        write_state(path, self.device_id, self.to_json())


def _mapping(value: object, name: str) -> Mapping[str, object]:
    if not isinstance(value, dict):
        raise ValueError(f"{name} must be an object")
    return cast(Mapping[str, object], value)


def _text(obj: Mapping[str, object], key: str, *, allow_empty: bool = False) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or (not value and not allow_empty):
        raise ValueError(
            f"{key} must be a non-empty string" if not allow_empty else f"{key} must be a string"
        )
    return value


def _key(obj: Mapping[str, object], key: str) -> str:
    value = _text(obj, key)
    try:
        decode_public_key(value)
    except InvalidPublicKey as exc:
        raise ValueError(f"{key}: {exc}") from exc
    return value
