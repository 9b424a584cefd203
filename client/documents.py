"""The phone's documents: a ``document`` push names a parked document, which is pulled, decrypted,
its filename made safe again (``core.domain.filenames``) and written into the downloads folder
atomically and without replacing an existing file (``notes (1).md``)."""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

from client.dispatch import one_line
from client.opener import Received
from client.output import Output
from client.payload_fields import ID
from client.phone_api import PhoneApi
from client.state import ClientError, DeviceState
from core.domain.envelope import EnvelopeError, open_envelope
from core.domain.filenames import UnsafeFilenameError, sanitize_filename
from core.domain.keys import InvalidPublicKey, decode_public_key

MAX_COPIES = 999  # "name (999).ext" is the last name tried before giving up


class DocumentError(ClientError):
    """A document that could not be pulled, opened, named safely or written."""


def open_document(blob: str, state: DeviceState, document_id: str) -> tuple[str, str]:
    """Decrypt a pulled document (an envelope from the server); returns its filename and content."""
    try:
        sealed = base64.b64decode(blob, validate=True)
    except binascii.Error as error:
        raise DocumentError("unreadable_document", "the pulled document is not base64") from error
    try:
        plaintext = open_envelope(sealed, state.secret_key_bytes, decode_public_key(state.server_public_key))
    except (EnvelopeError, InvalidPublicKey) as error:
        raise DocumentError(
            "unreadable_document", f"cannot open the document ({type(error).__name__}: {error})"
        ) from error
    try:
        payload: object = json.loads(plaintext.decode("utf-8"))
    except ValueError as error:  # not UTF-8, or not JSON
        raise DocumentError("unreadable_document", "the document is not UTF-8 JSON") from error
    if not isinstance(payload, dict) or payload.get("type") != "document":
        raise DocumentError("unreadable_document", "the envelope does not hold a document")
    fields = cast(dict[str, Any], payload)
    if fields.get("document_id") != document_id:
        raise DocumentError("unreadable_document", "the envelope holds another document")
    filename, content = fields.get("filename"), fields.get("content")
    if not isinstance(filename, str) or not isinstance(content, str):
        raise DocumentError("unreadable_document", "the document lacks its filename or content")
    return filename, content


def safe_filename(raw: str) -> str:
    """The filename made safe again, as the server did (``core.domain.filenames``); refused if it
    cannot be (``unsafe_filename``)."""
    try:
        return sanitize_filename(raw)
    except UnsafeFilenameError as error:
        raise DocumentError("unsafe_filename", f"refused {one_line(raw)!r}: {error}") from error


def numbered_names(name: str, limit: int = MAX_COPIES) -> Iterator[str]:
    """``name``, then ``stem (1).ext``, ``stem (2).ext`` … up to ``limit``."""
    yield name
    stem, dot, extension = name.rpartition(".")
    if not dot:
        stem, extension = name, ""
    for number in range(1, limit + 1):
        yield f"{stem} ({number}){dot}{extension}"


def save_document(folder: Path, name: str, content: str) -> Path:
    """``save_file`` of ``content`` as UTF-8."""
    return save_file(folder, name, content.encode("utf-8", "replace"))


def save_file(folder: Path, name: str, data: bytes) -> Path:
    """Write ``data`` as ``name`` in ``folder`` — or the first free numbered name — and return the
    path.

    Atomic: the bytes go to a hidden temporary file (mode 0600, synced) beside the target, which is
    then given its final name in one step, so a partly written document is never visible. That step
    never replaces an existing file: a hard link (``os.link`` fails if the name exists, even if
    another process just took it); on a file system without hard links, ``os.replace`` onto a name
    checked to be free.
    """
    if not name or Path(name).name != name or name in (".", ".."):
        raise DocumentError("unsafe_filename", f"{name!r} is not a plain file name")
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = folder / f".{name}.{secrets.token_hex(6)}.part"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(temporary, flags, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        return place_file(temporary, folder, name)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


def place_file(temporary: Path, folder: Path, name: str) -> Path:
    """Give the finished ``temporary`` file (in ``folder``) its name, or the first free numbered one,
    never replacing an existing file; returns the final path."""
    for candidate in numbered_names(name, MAX_COPIES):
        target = folder / candidate
        try:
            os.link(temporary, target)
        except FileExistsError:
            continue
        except OSError:  # no hard links here (some network and FAT file systems)
            if os.path.lexists(target):
                continue
            os.replace(temporary, target)
        return target
    raise DocumentError("no_free_name", f"{MAX_COPIES} files named like {name!r} exist already")


class PhoneDocuments:
    """Pulls the documents pushed to the phone through ``api`` and saves them into ``downloads``,
    printing each outcome through ``output``."""

    def __init__(self, api: PhoneApi, state: DeviceState, output: Output, downloads: Path) -> None:
        self.state = state
        self.output = output
        self.downloads = downloads
        self._api = api

    def on_document(self, item: Received) -> str:
        document_id = item.payload.get("documentId")
        if not isinstance(document_id, str) or not ID.fullmatch(document_id):
            return one_line(f"document push without a usable documentId: {document_id!r}")
        try:
            filename, content = open_document(self._api.pull_document(document_id), self.state, document_id)
            name = safe_filename(filename)
            saved = save_document(self.downloads, name, content)
        except ClientError as error:
            refused = error.code == "unsafe_filename"
            self.output.show(
                f"DOCUMENT {'REFUSED' if refused else 'FAILED'} [{document_id}]: "
                f"{error.code}: {one_line(error.message)}",
                {
                    "type": "document_refused" if refused else "document_failed",
                    "document_id": document_id,
                    "code": error.code,
                    "message": error.message,
                },
            )
            return ""
        except OSError as error:
            message = f"cannot write into {self.downloads}: {error.strerror or error}"
            self.output.show(
                f"DOCUMENT FAILED [{document_id}]: os_error: {one_line(message)}",
                {
                    "type": "document_failed",
                    "document_id": document_id,
                    "code": "os_error",
                    "message": message,
                },
            )
            return ""
        self.output.show(
            f"SAVED {one_line(saved)}",
            {"type": "saved", "document_id": document_id, "filename": saved.name, "path": str(saved)},
        )
        return ""
