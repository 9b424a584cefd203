"""Where a device saves the files and documents it receives unless ``--downloads`` names a folder:
a folder of its own in the user's downloads folder, ``relaybox`` for a computer and
``relaybox-phone`` for the virtual phone, so that what each receives never mixes with the other's
(on one machine both often run)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from client.state import Role

DOWNLOAD_DIR_ENV = "XDG_DOWNLOAD_DIR"
FOLDERS: dict[Role, str] = {"computer": "relaybox", "phone": "relaybox-phone"}
# For help texts: the default, as a person reads it.
DEFAULT_HELP = {
    role: f"${DOWNLOAD_DIR_ENV}/{name}, else ~/Downloads/{name}" for role, name in FOLDERS.items()
}


def user_downloads_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_DOWNLOAD_DIR`` when set to an absolute path (``~`` allowed), else ``~/Downloads``."""
    env = os.environ if environ is None else environ
    configured = Path(env.get(DOWNLOAD_DIR_ENV, "")).expanduser()
    return configured if configured.is_absolute() else Path.home() / "Downloads"


def default_downloads_dir(role: Role, environ: Mapping[str, str] | None = None) -> Path:
    """The ``role``'s own folder in the user's downloads folder (``FOLDERS``)."""
    return user_downloads_dir(environ) / FOLDERS[role]
