"""A notification's attachment on the phone: the notification envelope names it (``attachment``:
id, format, key, name, type, size); the phone pulls the ciphertext, opens it with that key
(``core.domain.attachments``), makes the name safe again and saves it into its downloads folder,
never replacing a file (``client.documents.save_file``)."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from client.dispatch import Describe, one_line
from client.documents import save_file
from client.opener import Received
from client.output import Output
from client.payload_fields import ID
from client.phone_api import PhoneApi
from client.state import ClientError
from core.domain.attachments import FORMAT, AttachmentError, open_attachment
from core.domain.filenames import UnsafeFilenameError, plain_name

FALLBACK_NAME = "attachment"


@dataclass(frozen=True)
class AttachmentRef:
    attachment_id: str
    key: bytes
    name: str
    mime_type: str
    size: int


def attachment_ref(raw: object) -> AttachmentRef:
    """The ``attachment`` field of a notification, checked; ``ClientError`` when unusable."""
    if not isinstance(raw, dict):
        raise ClientError("invalid_attachment", "the attachment reference is not an object")
    fields: dict[str, Any] = raw
    attachment_id, key, name = fields.get("id"), fields.get("key"), fields.get("name")
    mime_type, size = fields.get("type"), fields.get("size")
    if (
        fields.get("format") != FORMAT
        or not isinstance(attachment_id, str)
        or not ID.fullmatch(attachment_id)
    ):
        raise ClientError("invalid_attachment", "the attachment reference lacks its id or format")
    if not isinstance(key, str) or not isinstance(mime_type, str):
        raise ClientError("invalid_attachment", "the attachment reference lacks its key or type")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise ClientError("invalid_attachment", "the attachment reference lacks its size")
    try:
        key_bytes = base64.b64decode(key, validate=True)
    except binascii.Error as error:
        raise ClientError("invalid_attachment", "the attachment key is not base64") from error
    try:
        safe = plain_name(name) if isinstance(name, str) and name else FALLBACK_NAME
    except UnsafeFilenameError:
        safe = FALLBACK_NAME
    return AttachmentRef(attachment_id, key_bytes, safe, mime_type, size)


class PhoneAttachments:
    """Saves the attachment a notification carries into ``downloads``, after ``describing`` it."""

    def __init__(self, api: PhoneApi, output: Output, downloads: Path) -> None:
        self.output = output
        self.downloads = downloads
        self._api = api

    def saving(self, describe: Describe) -> Describe:
        """``describe`` (how notifications are shown), then the attachment saved."""

        def on_notification(item: Received) -> str:
            line = describe(item)
            raw = item.payload.get("attachment")
            if raw is not None:
                self._receive(raw)
            return line

        return on_notification

    def _receive(self, raw: object) -> None:
        try:
            ref = attachment_ref(raw)
            try:
                data = open_attachment(ref.key, self._api.pull_attachment(ref.attachment_id))
            except AttachmentError as error:
                raise ClientError("unreadable_attachment", str(error)) from error
            if len(data) != ref.size:
                raise ClientError("unreadable_attachment", "it is not the size its notification says")
            saved = save_file(self.downloads, ref.name, data)
        except ClientError as error:
            self._failed(error.code, error.message)
            return
        except OSError as error:
            self._failed("os_error", f"cannot write into {self.downloads}: {error.strerror or error}")
            return
        self.output.show(
            f"ATTACHMENT SAVED {one_line(saved)} ({one_line(ref.mime_type)}, {ref.size} bytes)",
            {
                "type": "attachment_saved",
                "attachment_id": ref.attachment_id,
                "path": str(saved),
                "mime_type": ref.mime_type,
                "size": ref.size,
            },
        )

    def _failed(self, code: str, message: str) -> None:
        self.output.show(
            f"ATTACHMENT FAILED: {code}: {one_line(message)}",
            {"type": "attachment_failed", "code": code, "message": message},
        )
