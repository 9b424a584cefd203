"""Pushover's receipt and limit routes beside the native ones: ``GET /v1/receipts/{receipt}.json``
and ``POST /v1/receipts/{receipt}/cancel.json`` (an urgent notification sent with priority 2,
``core.services.receipts``), and ``GET /v1/apps/limits.json`` (the token's monthly budget), each
with the token in the query or body and in Pushover's shapes (``core.api.pushover``)."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse, Response

from core.api.pushover import authenticate_shim, failure, shim_fields
from core.api.pushover_shapes import ShimError, ShimOk
from core.api.receipts import PATH
from core.api.routing import Call, Endpoint
from core.domain.secrets import new_prefixed_id
from core.errors import RelayError
from core.principal import Principal
from core.services import receipts
from core.services.limits import peek_send_class
from core.services.receipt_views import receipt_and_callback

TOKEN_QUERY = {"query": [{"name": "token", "in": "query", "required": True, "schema": {"type": "string"}}]}


async def get_pushover_receipt(call: Call) -> Response:
    """Pushover's receipt: acknowledged (by which device), expired, called back."""
    try:
        principal = await authenticate_shim(call, (await shim_fields(call)).get("token"))
        out, called_back_at = await call.core.run(
            receipt_and_callback, principal, receipt_id=call.path["receipt_id"]
        )
    except RelayError as error:
        return await failure(call, error, None)
    by = out.acknowledged_by
    answer: dict[str, Any] = {
        "status": 1,
        "acknowledged": int(out.status == "acknowledged"),
        "acknowledged_at": out.acknowledged_at or 0,
        "acknowledged_by": by.device_id if by else "",
        "acknowledged_by_device": (by.name or "") if by else "",
        "last_delivered_at": out.created_at,
        "expired": int(out.status in ("expired", "cancelled")),  # it alerts no more, unacknowledged
        "expires_at": out.expires_at,
        "called_back": int(called_back_at is not None),
        "called_back_at": called_back_at or 0,
        "request": new_prefixed_id("req"),
    }
    return JSONResponse(answer)


async def cancel_pushover_receipt(call: Call) -> Response:
    """Stop the alerts (idempotent, as the native cancel)."""
    try:
        principal = await authenticate_shim(call, (await shim_fields(call)).get("token"))
        await call.core.run(receipts.cancel_receipt, principal, receipt_id=call.path["receipt_id"])
    except RelayError as error:
        return await failure(call, error, None)
    return JSONResponse({"status": 1, "request": new_prefixed_id("req")})


async def app_limits(call: Call) -> Response:
    """The token's calendar-month budget (``token_monthly``), as Pushover's application limits."""
    principal: Principal | None = None
    try:
        principal = await authenticate_shim(call, (await shim_fields(call)).get("token"))
        _, monthly = await call.core.run(peek_send_class, principal, ip=call.ip)
    except RelayError as error:
        return await failure(call, error, principal)
    assert monthly is not None  # a sender token always has the layer
    answer = {"limit": monthly.limit, "remaining": monthly.remaining, "reset": monthly.reset_at}
    return JSONResponse({**answer, "status": 1, "request": new_prefixed_id("req")})


ENDPOINTS = [
    Endpoint(
        "GET",
        "/v1/receipts/{receipt_id}.json",
        get_pushover_receipt,
        "Pushover-compatible receipt of a priority 2 message",
        auth=None,
        response=ShimOk,
        errors=("invalid_token", "receipt_not_found", "insufficient_scope", "rate_limit_exceeded"),
        error_doc=ShimError,
        tag="pushover",
        extra={**PATH, **TOKEN_QUERY},
    ),
    Endpoint(
        "POST",
        "/v1/receipts/{receipt_id}/cancel.json",
        cancel_pushover_receipt,
        "Pushover-compatible cancel of a priority 2 message's alerts",
        auth=None,
        response=ShimOk,
        errors=("invalid_token", "receipt_not_found", "insufficient_scope", "rate_limit_exceeded"),
        error_doc=ShimError,
        tag="pushover",
        extra=PATH,
    ),
    Endpoint(
        "GET",
        "/v1/apps/limits.json",
        app_limits,
        "Pushover-compatible monthly limit of the token",
        auth=None,
        response=ShimOk,
        errors=("invalid_token", "rate_limit_exceeded"),
        error_doc=ShimError,
        tag="pushover",
        extra=TOKEN_QUERY,
    ),
]
