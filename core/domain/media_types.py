"""An attachment's media type when its sender gave none (pure; no I/O): Apprise's Pushover and ntfy
plugins, ``curl -T``, and base64 bodies send bytes without one. The bytes' own signature decides
first (what a browser sniffs for the types a phone shows), then the file name's extension, then
UTF-8 text; anything else stays ``application/octet-stream``."""

from __future__ import annotations

import mimetypes

OCTET_STREAM = "application/octet-stream"
UNTYPED = ("", OCTET_STREAM, "binary/octet-stream")
TEXT_SNIFF_BYTES = 4096
# (signature at offset 0, media type, extension); WebP is RIFF….WEBP, read apart.
_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png", ".png"),
    (b"\xff\xd8\xff", "image/jpeg", ".jpg"),
    (b"GIF87a", "image/gif", ".gif"),
    (b"GIF89a", "image/gif", ".gif"),
    (b"BM", "image/bmp", ".bmp"),
    (b"%PDF-", "application/pdf", ".pdf"),
    (b"PK\x03\x04", "application/zip", ".zip"),
    (b"\x1f\x8b", "application/gzip", ".gz"),
    (b"ID3", "audio/mpeg", ".mp3"),
    (b"OggS", "audio/ogg", ".ogg"),
)
# The standard library's own table only, never the machine's /etc/mime.types: the same answer on
# every server.
_BY_EXTENSION = mimetypes.MimeTypes(filenames=())


def media_type(data: bytes, name: str | None, given: str | None) -> str:
    """``given`` unless it says nothing (absent or octet-stream), else the sniffed type."""
    stated = (given or "").split(";")[0].strip().lower()
    if stated not in UNTYPED:
        return stated
    return sniffed(data, name)[0]


def sniffed(data: bytes, name: str | None) -> tuple[str, str]:
    """The media type of ``data`` and the extension it goes with ("" when none is known)."""
    for signature, kind, extension in _SIGNATURES:
        if data.startswith(signature):
            return kind, extension
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp", ".webp"
    if name:
        guessed, _ = _BY_EXTENSION.guess_type(name, strict=True)
        if guessed:
            return guessed, _BY_EXTENSION.guess_extension(guessed) or ""
    if _is_text(data[:TEXT_SNIFF_BYTES]):
        return "text/plain", ".txt"
    return OCTET_STREAM, ""


def _is_text(head: bytes) -> bool:
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as error:
        # A multi-byte character cut at the end of the sample is still text.
        return error.start >= len(head) - 3 and error.reason == "unexpected end of data"
    return b"\x00" not in head


def extension_for(kind: str) -> str:
    """The usual extension of a media type ("" when none is known), for a file the sender named not."""
    for _, known, extension in _SIGNATURES:
        if known == kind:
            return extension
    return _BY_EXTENSION.guess_extension(kind) or ("" if kind != "text/plain" else ".txt")
