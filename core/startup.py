"""What stops a server from starting: a setting that cannot work where it is used, said in one line
that names the setting (``relaybox serve`` prints it and exits 1, never a traceback).

``check_deployment`` is what ``relaybox serve`` checks before it builds anything. PostgreSQL is how
replicas share state (SQLite is one process's file), so on PostgreSQL a server is taken to be one
of several and refuses what would make it differ from its neighbours: a server key of its own
(generated into its data folder, unlike every other replica's) and an object store of its own (the
embedded store in its data folder, which no other replica can read: a chunk uploaded through one
replica would be ``not_found`` through another). docs/operations.md says why each is required.
"""

from __future__ import annotations

from pathlib import Path

from core.settings import Settings
from core.store.database import is_sqlite

KEY_HINT = "base64 of 32 random bytes: openssl rand -base64 32"


class StartupError(ValueError):
    """A setting that stops the server from starting; the message is one line naming it."""


def check_deployment(settings: Settings) -> None:
    """Raise ``StartupError`` for a PostgreSQL server whose key or object store would be its own."""
    if is_sqlite(settings.effective_database_url):
        return
    if settings.server_secret_key is None:
        raise StartupError(
            "RELAYBOX_SERVER_SECRET_KEY is required with PostgreSQL: every replica must hold the same "
            f"key ({KEY_HINT}); a server that ran before with a generated key keeps it in "
            f"{settings.data_dir / 'server.key'}: set the setting to that file's content"
        )
    if not settings.s3_bucket and settings.file_store_dir is None:
        raise StartupError(
            "RELAYBOX_S3_BUCKET is required with PostgreSQL: file chunks in this server's data folder "
            "cannot be read by another replica; set RELAYBOX_S3_BUCKET (an S3-compatible bucket, "
            "docs/operations.md), or RELAYBOX_FILE_STORE_DIR to a folder every replica shares"
        )


def readable_file(setting: str, path: Path) -> Path:
    """``path`` when it is a file this process can read; else ``StartupError`` naming ``setting``."""
    try:
        with path.open("rb"):
            pass
    except FileNotFoundError:
        raise StartupError(f"{setting}={path}: no such file") from None
    except IsADirectoryError:
        raise StartupError(f"{setting}={path}: is a folder, not a file") from None
    except PermissionError:
        raise StartupError(f"{setting}={path}: not readable by this user") from None
    except OSError as error:
        raise StartupError(f"{setting}={path}: cannot be read ({error.strerror or error})") from None
    return path
