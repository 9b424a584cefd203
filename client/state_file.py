"""The file a device's state lives in: one JSON object, readable by its owner only.

It holds the device credential and the X25519 secret key, so it is written with mode 0600 from
the first byte: a temporary file is created with ``os.open(..., 0o600)`` in the same folder,
filled, flushed to disk and moved over the old file with ``os.replace`` (atomic on POSIX).
Besides the state itself, other parts of the client keep top-level fields in the same file
(``last_seq``, the phone's armed ``reminders``) through ``update_fields`` and ``read_field``.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Literal, cast

# The two roles a device's state file can hold; ``client.state`` re-exports them with the state.
Role = Literal["phone", "computer"]
ROLES: tuple[Role, ...] = ("phone", "computer")

STATE_DIR_ENV = "RELAYBOX_CLIENT_STATE_DIR"
FILE_MODE = 0o600
DIR_MODE = 0o700
# Read-modify-write of a state file by several threads of one process (the stream's position, the
# phone's armed reminders, a save) happens under this lock, so no writer loses another's field.
_FILE_LOCK = threading.Lock()


def write_state(path: Path, device_id: str, data: Mapping[str, object]) -> None:
    """Write the state ``data`` of ``device_id`` to ``path`` (see ``write_private``), carrying over
    the other fields of the file when it holds this same device; a new device starts without them."""
    with _FILE_LOCK:
        kept = {key: value for key, value in _read_fields(path, device_id).items() if key not in data}
        write_private(path, json.dumps(kept | dict(data), indent=2, sort_keys=True) + "\n")


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
