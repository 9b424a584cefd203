"""Reading the fields of a send from JSON, form-encoded, multipart or plain-text bodies."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from starlette.datastructures import Headers, UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.requests import Request

from core.api.routing import parse_json, read_body
from core.errors import RelayError

MAX_FORM_FIELDS = 64


@dataclass(frozen=True)
class FilePart:
    """A file part of a multipart body (read whole: the body limit bounds it)."""

    filename: str | None
    content_type: str | None
    data: bytes


async def read_fields(
    request: Request, limit: int, *, multipart: bool = False, files: int = 0
) -> dict[str, Any]:
    """The body's fields. No Content-Type or ``text/plain``: the whole body is ``message``. A
    multipart body may carry up to ``files`` file parts, given as ``FilePart`` values."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    raw = await read_body(request, limit)
    if content_type in ("", "text/plain"):
        return {"message": _text(raw)} if raw else {}
    if content_type == "application/json":
        data = parse_json(raw)
        if not isinstance(data, dict):
            raise RelayError("invalid_body", "The body must be a JSON object.")
        return data
    if content_type == "application/x-www-form-urlencoded":
        try:
            pairs = parse_qsl(
                _text(raw), keep_blank_values=True, max_num_fields=MAX_FORM_FIELDS, errors="strict"
            )
        except ValueError as exc:
            raise RelayError("invalid_body", "The form is not valid UTF-8 or has too many fields.") from exc
        return dict(pairs)
    if content_type == "multipart/form-data" and multipart:
        return await _multipart(request.headers, raw, files)
    raise RelayError("unsupported_content_type", "Send JSON, form-encoded or plain text.")


def _text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RelayError("invalid_body", "The body is not UTF-8 text.") from exc


async def _multipart(headers: Headers, raw: bytes, files: int) -> dict[str, Any]:
    async def body() -> AsyncGenerator[bytes, None]:
        yield raw

    parser = MultiPartParser(headers, body(), max_files=files, max_fields=MAX_FORM_FIELDS)
    try:
        form = await parser.parse()
    except MultiPartException as exc:
        raise RelayError("invalid_body", "The multipart body could not be read.") from exc
    fields: dict[str, Any] = {}
    try:
        for key, value in form.multi_items():
            if isinstance(value, UploadFile):
                fields[key] = FilePart(value.filename, value.content_type, await value.read())
            else:
                fields[key] = value
    finally:
        await form.close()
    return fields
