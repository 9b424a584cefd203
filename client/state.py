"""A device's local state: one JSON file, readable by its owner only.

It holds the device credential and the X25519 secret key, so it is written with mode 0600 from
the first byte: a temporary file is created with ``os.open(..., 0o600)`` in the same folder,
filled, flushed to disk and moved over the old file with ``os.replace`` (atomic on POSIX).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
import secrets
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from core.domain.keys import KEY_LENGTH, InvalidPublicKey, decode_public_key, public_key_of
from core.domain.safety import safety_number

Role = Literal["phone", "computer"]
ROLES: tuple[Role, ...] = ("phone", "computer")
STATE_VERSION = 1
STATE_DIR_ENV = "RELAYBOX_CLIENT_STATE_DIR"
FILE_MODE = 0o600
DIR_MODE = 0o700
# Read-modify-write of a state file by several threads of one process (the stream's position, the
# phone's armed reminders, a save) happens under this lock, so no writer loses another's field.
_FILE_LOCK = threading.Lock()


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
        data = self.to_json()
        with _FILE_LOCK:
            kept = {
                key: value for key, value in _read_fields(path, self.device_id).items() if key not in data
            }
            write_private(path, json.dumps(kept | data, indent=2, sort_keys=True) + "\n")


def default_state_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$RELAYBOX_CLIENT_STATE_DIR`` if set, else ``~/.config/relaybox``."""
    env = os.environ if environ is None else environ
    configured = env.get(STATE_DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".config" / "relaybox"


def default_state_path(role: Role, environ: Mapping[str, str] | None = None) -> Path:
    """``phone.json`` or ``computer.json`` in the default state folder."""
    return default_state_dir(environ) / f"{role}.json"


def update_fields(path: Path, device_id: str, fields: Mapping[str, object]) -> bool:
    """Set top-level ``fields`` in the state file (``None`` removes one), changing nothing else.

    The file is read fresh, so fields another command wrote meanwhile survive. A file that now holds
    another device, or is not a JSON object, is left alone (returns False). A missing or unreadable
    file raises ``OSError``, one that is not JSON ``ValueError``.
    """
    with _FILE_LOCK:
        raw: object = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(raw, dict) or raw.get("device_id") != device_id:
            return False
        for key, value in fields.items():
            if value is None:
                raw.pop(key, None)
            else:
                raw[key] = value
        write_private(path, json.dumps(raw, indent=2, sort_keys=True) + "\n")
        return True


def read_field(path: Path, device_id: str, key: str) -> object:
    """One top-level field of the state file, ``None`` when absent, unreadable or another device's."""
    return _read_fields(path, device_id).get(key)


def _read_fields(path: Path, device_id: str) -> dict[str, object]:
    try:
        raw: object = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(raw, dict) or raw.get("device_id") != device_id:
        return {}
    return cast(dict[str, object], raw)


def write_private(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically; the file is never readable by anyone but its owner.

    The temporary file is created exclusively with mode 0600 beside the target (so ``os.replace``
    stays on one file system), synced, then renamed over the target. On any failure it is removed
    and the old file is left as it was.
    """
    path.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), FILE_MODE)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    _sync_directory(path.parent)


def _sync_directory(directory: Path) -> None:
    # Makes the rename durable across a crash; some file systems refuse fsync on a folder.
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


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
