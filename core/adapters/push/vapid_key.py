"""The P-256 key web push is signed with (VAPID, RFC 8292): from settings, or generated into the data
folder on first run, as the server's own key is, so that a browser can subscribe to a fresh server
with nothing configured. Browsers subscribe with its public half (``GET /v1/push/web-key``); a new key
would orphan every subscription, so the file is kept and never rewritten. Replicas sharing a
PostgreSQL database share one key kept in the database instead (``shared_vapid_private_key``)."""

from __future__ import annotations

import base64
import logging
import os
from collections.abc import Callable
from pathlib import Path

import nacl.exceptions
import nacl.secret
from cryptography.hazmat.primitives.asymmetric import ec

from core.server_keys import ServerKeys
from core.settings import Settings
from core.startup import StartupError

KEY_FILE = "vapid.key"
SHARED_NAME = "vapid_private_key"  # its name among the database's shared secrets
log = logging.getLogger("relaybox.core")


def vapid_private_key(settings: Settings) -> str:
    """``vapid_private_key`` if set, else the data folder's key (base64url of the raw scalar)."""
    if settings.vapid_private_key is not None:
        return settings.vapid_private_key.get_secret_value()
    if settings.redis_url:
        log.warning(
            "RELAYBOX_VAPID_PRIVATE_KEY is not set: this replica signs web push with the key in its "
            "data folder; every replica must be given the same key"
        )
    path = settings.data_dir / KEY_FILE
    if not path.exists():
        _generate(path)
    return path.read_text().strip()


def shared_vapid_private_key(
    settings: Settings, keys: ServerKeys, keep_once: Callable[[str, bytes], bytes]
) -> str:
    """The one VAPID key of replicas sharing a database, where none is configured: the key kept in
    the database, or else this replica's candidate, which ``keep_once`` keeps unless another
    replica's got there first. The candidate is the data folder's key when there is one (a server
    that ran alone before keeps its browsers' subscriptions), else a new one. Kept sealed with a key
    derived from the server key: a database dump alone does not hold it, and a replica given
    another server key cannot open it and refuses to start (its devices could not open what it
    seals either)."""
    path = settings.data_dir / KEY_FILE
    candidate = path.read_text().strip() if path.exists() else _new_key()
    box = nacl.secret.SecretBox(keys.derived_key("vapid-private-key"))
    kept = keep_once(SHARED_NAME, box.encrypt(candidate.encode()))
    try:
        return box.decrypt(kept).decode()
    except nacl.exceptions.CryptoError:
        raise StartupError(
            "RELAYBOX_SERVER_SECRET_KEY is not the key this database's other servers use (the web push "
            "key kept in the database was sealed with another): give every replica the same key"
        ) from None


def _new_key() -> str:
    """A new P-256 private key: base64url of its raw scalar."""
    scalar = ec.generate_private_key(ec.SECP256R1()).private_numbers().private_value.to_bytes(32, "big")
    return base64.urlsafe_b64encode(scalar).rstrip(b"=").decode()


def _generate(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = _new_key()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return  # another process made it first: use theirs
    with os.fdopen(fd, "w") as handle:
        handle.write(text + "\n")
