"""The object-store Protocol: where the encrypted chunks of file transfers live.

Devices never send chunks through relaybox's API; they get short-lived presigned URLs, each
bound to one object, one method and one size. Two implementations sit beside this file: the
embedded store (a local folder served by relaybox's own ``/v1/objects`` routes) and an
S3-compatible bucket. Only ciphertext is ever stored.
"""

from __future__ import annotations

import re
from typing import Protocol

TRANSFER_ID = re.compile(r"^xfr_[0-9a-f]{32}$")


class ObjectStore(Protocol):
    """Presigns URLs for objects and deletes them. Object keys are ``<transfer_id>/<index>``."""

    def upload_url(self, key: str, *, size: int, now: int, expires_at: int) -> str:
        """A URL that accepts a PUT of exactly ``size`` bytes to ``key`` until ``expires_at``
        (epoch seconds; ``now`` is the server's time, for stores that sign a lifetime)."""
        ...

    def download_url(self, key: str, *, size: int, now: int, expires_at: int) -> str:
        """A URL that serves ``key`` (``size`` bytes) to a GET until ``expires_at``."""
        ...

    def delete_transfer(self, transfer_id: str) -> None:
        """Delete every object of one transfer; a transfer without objects is fine. Blocking I/O."""
        ...


def object_key(transfer_id: str, index: int) -> str:
    if not TRANSFER_ID.fullmatch(transfer_id) or index < 0:
        raise ValueError("not an object of a transfer")
    return f"{transfer_id}/{index}"
