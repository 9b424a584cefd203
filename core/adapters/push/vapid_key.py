"""The P-256 key web push is signed with (VAPID, RFC 8292): from settings, or generated into the data
folder on first run, as the server's own key is, so that a browser can subscribe to a fresh server
with nothing configured. Browsers subscribe with its public half (``GET /v1/push/web-key``); a new key
would orphan every subscription, so the file is kept and never rewritten."""

from __future__ import annotations

import base64
import logging
import os
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric import ec

from core.settings import Settings

KEY_FILE = "vapid.key"
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


def _generate(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    scalar = ec.generate_private_key(ec.SECP256R1()).private_numbers().private_value.to_bytes(32, "big")
    text = base64.urlsafe_b64encode(scalar).rstrip(b"=").decode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return  # another process made it first: use theirs
    with os.fdopen(fd, "w") as handle:
        handle.write(text + "\n")
