"""File-transfer routes: the broker, with device credentials (the embedded store's presigned object
routes are in ``core.api.embedded_objects``)."""

from __future__ import annotations

from pydantic import BaseModel

from core.api.routing import Call, Endpoint
from core.services import transfers
from core.services.auth import Accept


async def create_transfer(call: Call) -> BaseModel:
    body = call.body_as(transfers.TransferCreate)
    return await call.core.run(transfers.create_transfer, call.principal, body=body)


async def get_transfer(call: Call) -> BaseModel:
    return await call.core.run(transfers.get_transfer, call.principal, transfer_id=call.path["transfer_id"])


async def upload_urls(call: Call) -> BaseModel:
    body = call.body_as(transfers.ChunkUrlsRequest)
    transfer_id = call.path["transfer_id"]
    return await call.core.run(transfers.upload_urls, call.principal, transfer_id=transfer_id, body=body)


async def download_urls(call: Call) -> BaseModel:
    body = call.body_as(transfers.ChunkUrlsRequest)
    transfer_id = call.path["transfer_id"]
    return await call.core.run(transfers.download_urls, call.principal, transfer_id=transfer_id, body=body)


async def end_transfer(call: Call) -> None:
    await call.core.run(transfers.end_transfer, call.principal, transfer_id=call.path["transfer_id"])


URL_ERRORS = ("invalid_chunk_index", "not_found", "forbidden")

ENDPOINTS = [
    Endpoint(
        "POST",
        "/v1/transfers",
        create_transfer,
        "Open a file transfer to a paired device (its chunk layout; the size counts against the quota)",
        auth=Accept.DEVICE,
        body=transfers.TransferCreate,
        response=transfers.TransferOut,
        status=201,
        errors=(
            "transfer_too_large",
            "invalid_chunk_layout",
            "storage_quota_exceeded",
            "not_found",
            "forbidden",
        ),
        tag="files",
    ),
    Endpoint(
        "GET",
        "/v1/transfers/{transfer_id}",
        get_transfer,
        "A transfer, as its sender or recipient sees it",
        auth=Accept.DEVICE,
        response=transfers.TransferOut,
        errors=("not_found", "forbidden"),
        tag="files",
    ),
    Endpoint(
        "POST",
        "/v1/transfers/{transfer_id}/upload-urls",
        upload_urls,
        "Presigned PUT URLs for chunks (the sender only)",
        auth=Accept.DEVICE,
        body=transfers.ChunkUrlsRequest,
        response=transfers.ChunkUrls,
        errors=URL_ERRORS,
        tag="files",
    ),
    Endpoint(
        "POST",
        "/v1/transfers/{transfer_id}/download-urls",
        download_urls,
        "Presigned GET URLs for chunks (the recipient only)",
        auth=Accept.DEVICE,
        body=transfers.ChunkUrlsRequest,
        response=transfers.ChunkUrls,
        errors=URL_ERRORS,
        tag="files",
    ),
    Endpoint(
        "DELETE",
        "/v1/transfers/{transfer_id}",
        end_transfer,
        "End a transfer (cancel, decline or complete) and delete its objects (either device)",
        auth=Accept.DEVICE,
        status=204,
        errors=("not_found", "forbidden"),
        tag="files",
    ),
]
