"""Receipts of urgent notifications that repeat until acknowledged: the sender polls and cancels,
a device acknowledges (``core.services.receipts``)."""

from __future__ import annotations

from pydantic import BaseModel
from starlette.responses import Response

from core.api.phone import WAIT, wait_seconds
from core.api.routing import Call, Endpoint, until_disconnected
from core.domain.urgent import RECEIPT_ID
from core.services import receipts
from core.services.auth import Accept

PATH = {"path": {"receipt_id": {"pattern": RECEIPT_ID.pattern}}}


async def get_receipt(call: Call) -> BaseModel | Response:
    wait = wait_seconds(call.request.query_params.get("wait"))
    receipt_id = call.path["receipt_id"]
    polled = await until_disconnected(
        call.request,
        call.core.run(receipts.poll_receipt, call.principal, receipt_id=receipt_id, wait=wait),
    )
    return polled if polled is not None else Response(status_code=204)  # nobody is left to hear it


async def cancel_receipt(call: Call) -> BaseModel:
    receipt_id = call.path["receipt_id"]
    return await call.core.run(receipts.cancel_receipt, call.principal, receipt_id=receipt_id)


async def acknowledge_receipt(call: Call) -> BaseModel:
    receipt_id = call.path["receipt_id"]
    return await call.core.run(receipts.acknowledge_receipt, call.principal, receipt_id=receipt_id)


ENDPOINTS = [
    Endpoint(
        "GET",
        "/v1/receipts/{receipt_id}",
        get_receipt,
        "An urgent notification's receipt: pending, acknowledged (by which device), expired or cancelled",
        auth=Accept.SENDER_TOKEN,
        response=receipts.ReceiptOut,
        description="`wait` (seconds) holds the answer while the receipt is pending, returning the "
        "moment a device acknowledges it or it is cancelled.",
        errors=("receipt_not_found", "invalid_wait", "insufficient_scope"),
        tag="send",
        extra={**PATH, "query": [WAIT]},
    ),
    Endpoint(
        "POST",
        "/v1/receipts/{receipt_id}/cancel",
        cancel_receipt,
        "Stop an urgent notification repeating (idempotent)",
        auth=Accept.SENDER_TOKEN,
        response=receipts.ReceiptOut,
        description="The devices are told to stop (`urgent_stop`, reason `cancelled`). A receipt "
        "already acknowledged, expired or cancelled is answered as it is.",
        errors=("receipt_not_found", "insufficient_scope"),
        tag="send",
        extra=PATH,
    ),
    Endpoint(
        "POST",
        "/v1/receipts/{receipt_id}/acknowledge",
        acknowledge_receipt,
        "A device acknowledges an urgent notification (the first acknowledgement wins; idempotent)",
        auth=Accept.DEVICE,
        response=receipts.ReceiptOut,
        description="Every device it went to is told to stop repeating (`urgent_stop`, reason "
        "`acknowledged`). A receipt already settled is answered as it is.",
        errors=("receipt_not_found",),
        tag="send",
        extra=PATH,
    ),
]
