"""The embedded object store's presigned routes (only without a bucket): chunk uploads and
downloads of file transfers, authorised by the URL's signature alone. Clients use the URLs the
broker (``core.api.transfers``) hands out as they are, as they would a bucket's."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import anyio
from starlette.requests import ClientDisconnect
from starlette.responses import Response, StreamingResponse

from core.adapters.storage.local import (
    OBJECTS_PATH,
    LocalObjectStore,
    ObjectIncompleteError,
    ObjectTooLargeError,
)
from core.api.routing import Call, Endpoint
from core.errors import RelayError
from core.services import transfers
from core.settings import Settings

READ_PIECE_BYTES = 256 * 1024
NO_STORE = {"Cache-Control": "no-store"}


def _store(call: Call) -> LocalObjectStore:
    store = call.core.objects
    assert isinstance(store, LocalObjectStore)  # these routes exist only for the embedded store
    return store


async def put_object(call: Call) -> Response:
    store = _store(call)
    key, size = _authorised(call, store, "PUT")
    declared = call.request.headers.get("content-length")
    if declared is not None and not (declared.isascii() and declared.isdigit()):
        raise RelayError("invalid_body", "Content-Length is not a number.")
    if declared is not None and int(declared) > size:
        raise RelayError("upload_too_large", details={"max": size})
    await _check_open(call)
    try:
        await store.write(key, size, call.request.stream())
    except ObjectTooLargeError as error:
        raise RelayError("upload_too_large", details={"max": size}) from error
    except ObjectIncompleteError as error:
        raise RelayError("upload_size_mismatch", details={"size": size}) from error
    except ClientDisconnect as error:
        raise RelayError("body_incomplete") from error
    try:
        await _check_open(call)  # ended while the body streamed in: leave no orphan behind
    except RelayError:
        await anyio.to_thread.run_sync(store.delete_transfer, call.path["transfer_id"])
        raise
    return Response(status_code=200, headers=NO_STORE)


async def get_object(call: Call) -> Response:
    store = _store(call)
    key, size = _authorised(call, store, "GET")
    await _check_open(call)
    try:
        handle = await anyio.open_file(store.path_of(key), "rb")
    except FileNotFoundError as error:
        raise RelayError("not_found", "That chunk has not been uploaded.") from error
    stat = await anyio.to_thread.run_sync(os.fstat, handle.wrapped.fileno())
    if stat.st_size != size:
        await handle.aclose()
        raise RelayError("not_found", "That chunk has not been uploaded.")

    async def pieces() -> AsyncIterator[bytes]:
        try:
            while piece := await handle.read(READ_PIECE_BYTES):
                yield piece
        finally:
            await handle.aclose()

    headers = {**NO_STORE, "Content-Length": str(size)}
    return StreamingResponse(pieces(), media_type="application/octet-stream", headers=headers)


PRESIGNED_QUERY = [
    {
        "name": "size",
        "in": "query",
        "required": True,
        "schema": {"type": "string", "pattern": "^[0-9]{1,19}$"},
    },
    {
        "name": "expires",
        "in": "query",
        "required": True,
        "schema": {"type": "string", "pattern": "^[0-9]{1,19}$"},
    },
    {"name": "signature", "in": "query", "required": True, "schema": {"type": "string", "maxLength": 64}},
]
OBJECT_PATH = OBJECTS_PATH + "/{transfer_id}/{index}"
PRESIGNED = "Only through a URL from the broker: the query's signature binds object, method, size and expiry."


def object_endpoints(settings: Settings) -> list[Endpoint]:
    """The embedded store's routes; none when a bucket serves the objects."""
    if settings.s3_bucket:
        return []
    return [
        Endpoint(
            "PUT",
            OBJECT_PATH,
            put_object,
            "Upload one encrypted chunk through a presigned URL (embedded store)",
            auth=None,
            errors=(
                "invalid_signature",
                "invalid_body",
                "upload_too_large",
                "upload_size_mismatch",
                "body_incomplete",
                "not_found",
            ),
            tag="files",
            description=PRESIGNED + " The body must be exactly `size` bytes; more is cut off with 413.",
            extra={"query": PRESIGNED_QUERY, "request_content_type": "application/octet-stream"},
        ),
        Endpoint(
            "GET",
            OBJECT_PATH,
            get_object,
            "Download one encrypted chunk through a presigned URL (embedded store)",
            auth=None,
            errors=("invalid_signature", "not_found"),
            tag="files",
            description=PRESIGNED,
            extra={"query": PRESIGNED_QUERY, "content_type": "application/octet-stream"},
        ),
    ]


def _authorised(call: Call, store: LocalObjectStore, method: str) -> tuple[str, int]:
    """The object key and bound size of a correctly signed, unexpired URL; 403 otherwise."""
    key = f"{call.path['transfer_id']}/{call.path['index']}"
    query = call.request.query_params
    try:
        store.path_of(key)
        size = store.verify(
            method,
            key,
            query.get("size"),
            query.get("expires"),
            query.get("signature"),
            now=int(call.core.clock.now()),
        )
    except (ValueError, PermissionError) as error:
        raise RelayError("invalid_signature") from error
    return key, size


async def _check_open(call: Call) -> None:
    await call.core.run(
        transfers.check_object,
        call.principal,
        transfer_id=call.path["transfer_id"],
        index=int(call.path["index"]),
    )
