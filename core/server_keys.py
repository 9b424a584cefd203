"""The server's own X25519 keypair: from settings, or generated into the data folder on first run."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from nacl.public import PrivateKey

from core.domain.envelope import BoxCache, PairBox, seal_each
from core.settings import Settings
from core.startup import KEY_HINT, StartupError

KEY_FILE = "server.key"
log = logging.getLogger("relaybox.core")


@dataclass(frozen=True)
class ServerKeys:
    secret_key: bytes = field(repr=False)
    public_key: bytes
    boxes: BoxCache = field(default_factory=BoxCache, repr=False, compare=False)

    @classmethod
    def from_secret(cls, secret: bytes) -> ServerKeys:
        return cls(secret, bytes(PrivateKey(secret).public_key))

    @property
    def public_key_b64(self) -> str:
        return base64.b64encode(self.public_key).decode()

    def seal_to(self, recipient_public_key: bytes, plaintext: bytes) -> bytes:
        """An envelope v1 from sender ``server`` to one device (shared key cached per device)."""
        return self.box_with(recipient_public_key).seal(plaintext)

    def seal_each(self, recipient_public_keys: Sequence[bytes], plaintext: bytes) -> list[bytes]:
        """``seal_to`` each of several devices, in their order (a send's one plaintext to each of
        an account's devices): see ``core.domain.envelope.seal_each``."""
        return seal_each(self.boxes.get_each(self.secret_key, recipient_public_keys), plaintext)

    def box_with(self, device_public_key: bytes) -> PairBox:
        """The box between the server and one device: seals to it, opens what it sealed to the server."""
        return self.boxes.get(self.secret_key, device_public_key)

    def derived_key(self, purpose: str) -> bytes:
        """A separate key for one purpose (e.g. pairing-code HMAC), so the box key is used only for boxes."""
        return hmac.new(self.secret_key, b"relaybox:" + purpose.encode(), hashlib.sha256).digest()


def load_server_keys(settings: Settings) -> ServerKeys:
    if settings.server_secret_key is not None:
        return ServerKeys.from_secret(_decode(settings.server_secret_key.get_secret_value()))
    if settings.redis_url:
        # Replicas (what Redis is for) each read their own data folder: without one shared key a
        # pairing code minted on one is "invalid_code" on another, and duplicate questions go unseen.
        log.warning(
            "RELAYBOX_SERVER_SECRET_KEY is not set: this replica uses the key in its data folder; "
            "every replica must be given the same key"
        )
    path = settings.data_dir / KEY_FILE
    if path.exists():
        return ServerKeys.from_secret(_decode(path.read_text().strip()))
    return _generate(path)


def _generate(path: Path) -> ServerKeys:
    path.parent.mkdir(parents=True, exist_ok=True)
    secret = bytes(PrivateKey.generate())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(base64.b64encode(secret).decode() + "\n")
    return ServerKeys.from_secret(secret)


def _decode(text: str) -> bytes:
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 32:
        raise StartupError(f"RELAYBOX_SERVER_SECRET_KEY must be {KEY_HINT}")
    return raw
