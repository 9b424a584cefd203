"""A Pushover-compatible shim: ``POST /v1/messages.json``, ``GET /v1/sounds.json`` and
``POST /v1/users/validate.json`` in Pushover's shapes, so existing Pushover client libraries work
when their base URL points at ``/v1/``. The token travels in the body or the query, not a header.

Pushover's ways of saying "every device" (no ``device``, an empty one, ``ALL_DEVICES`` as Apprise
sends) mean all of the account's devices; a name that matches none is ``status: 0``. The fields and
what each becomes are in ``core.api.pushover_fields`` (priority 2 is relaybox's urgent until
acknowledged, answered with a ``receipt``: ``core.api.pushover_receipts`` serves Pushover's receipt
routes). A file in an ``attachment`` part (or ``attachment_base64``), up to Pushover's 5 MB,
travels end to end encrypted beside the text (``core.services.attachments``), with its name and
its type (sniffed when the sender gives none, as Apprise does not). The bodies and answers as the
OpenAPI document shows them are in ``core.api.pushover_shapes``."""

from __future__ import annotations

import base64
import binascii
import functools
from typing import Any

import anyio
from starlette.responses import JSONResponse, Response

from core.api.forms import FilePart, read_fields
from core.api.pushover_fields import SOUNDS, message_fields
from core.api.pushover_shapes import MessageRequest, ShimError, ShimOk, ValidateRequest
from core.api.routing import Call, Endpoint
from core.domain.media_types import extension_for, media_type
from core.domain.secrets import is_sender_token, new_prefixed_id
from core.errors import RelayError
from core.principal import Principal
from core.services import attachments
from core.services.attachments import SealedAttachment
from core.services.auth import Accept, authenticate
from core.services.device_list import list_devices
from core.services.limits import limit_headers, peek_send_class
from core.services.send import send_notification

# The body may hold a 5 MB attachment, base64 in a form field (a third larger) or a file part.
BODY_MAX_BYTES = (attachments.MAX_BYTES + 2) // 3 * 4 + 64 * 1024


async def post_message(call: Call) -> Response:
    principal: Principal | None = None
    try:
        fields = await shim_fields(call, files=1)
        principal = await authenticate_shim(call, fields.get("token"))
        forwarded, callback = message_fields(call.core.settings, fields)
        attachment = await _attachment(fields)
        sent = await call.core.run(
            send_notification,
            principal,
            fields=forwarded,
            ip=call.ip,
            attachment=attachment,
            receipt_callback=callback,
        )
    except RelayError as error:
        return await failure(call, error, principal)
    headers = _app_headers(sent.monthly) | (limit_headers(sent.rate_limit) if sent.rate_limit else {})
    answer = {"status": 1, "request": sent.id} | ({"receipt": sent.receipt} if sent.receipt else {})
    return JSONResponse(answer, headers=headers)


async def list_sounds(call: Call) -> Response:
    try:  # the token in the query, or (pushover-complete sends it so) a form body on the GET
        await authenticate_shim(call, (await shim_fields(call)).get("token"))
    except RelayError as error:
        return await failure(call, error, None)
    return JSONResponse({"sounds": SOUNDS, "status": 1, "request": new_prefixed_id("req")})


async def validate_user(call: Call) -> Response:
    try:
        fields = await shim_fields(call)
        principal = await authenticate_shim(call, fields.get("token"))
        listing = await call.core.run(list_devices, principal)
    except RelayError as error:
        return await failure(call, error, None)
    names = [device.name or device.device_id for device in listing.devices]
    return JSONResponse(
        {
            "status": 1,
            "group": 0,
            "devices": names,
            "licenses": ["relaybox"],
            "request": new_prefixed_id("req"),
        }
    )


async def shim_fields(call: Call, *, files: int = 0) -> dict[str, Any]:
    fields: dict[str, Any] = dict(call.request.query_params)
    limit = max(call.core.settings.max_body_bytes, BODY_MAX_BYTES if files else 0)
    fields.update(await read_fields(call.request, limit, multipart=True, files=files))
    return fields


async def _attachment(fields: dict[str, Any]) -> SealedAttachment | None:
    """The attachment, sealed off the event loop: a file part, or base64 (with its type, or
    sniffed); a file the sender did not name is ``attachment`` with its type's extension."""
    part, encoded = fields.get("attachment"), fields.get("attachment_base64")
    if isinstance(part, FilePart):
        data, name, given = part.data, part.filename, part.content_type
    elif encoded is not None and encoded != "":
        if not isinstance(encoded, str):
            raise RelayError("invalid_attachment", "attachment_base64 must be standard base64 text.")
        try:
            data = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError) as error:  # ValueError: text outside ASCII
            raise RelayError("invalid_attachment", "attachment_base64 is not standard base64.") from error
        name, given = None, fields.get("attachment_type")
        if given is not None and not isinstance(given, str):
            raise RelayError("invalid_attachment", "attachment_type must be a MIME type such as image/jpeg.")
    elif part is not None and part != "":
        raise RelayError("invalid_attachment", "attachment must be a file part.")
    else:
        return None
    kind = media_type(data, name, given)
    name = name or f"{attachments.DEFAULT_NAME}{extension_for(kind)}"
    return await anyio.to_thread.run_sync(
        functools.partial(attachments.seal, data, name=name, mime_type=kind)
    )


async def authenticate_shim(call: Call, token: Any) -> Principal:
    if not isinstance(token, str) or not is_sender_token(token):
        raise RelayError("invalid_token")
    return await call.core.run(
        authenticate, Principal.anonymous(call.ip), token=token, accept=Accept.SENDER_TOKEN, limit_ip=True
    )


async def failure(call: Call, error: RelayError, principal: Principal | None) -> Response:
    headers = dict(error.headers)
    if principal is not None:
        binding, monthly = await call.core.run(peek_send_class, principal, ip=call.ip)
        headers = _app_headers(monthly) | limit_headers(binding) | headers
    body = {"status": 0, "errors": [error.code], "request": new_prefixed_id("req")}
    return JSONResponse(body, status_code=error.status, headers=headers)


def _app_headers(monthly: Any) -> dict[str, str]:
    if monthly is None:
        return {}
    return {
        "X-Limit-App-Limit": str(monthly.limit),
        "X-Limit-App-Remaining": str(monthly.remaining),
        "X-Limit-App-Reset": str(monthly.reset_at),
    }


SHIM_ERRORS = (
    "invalid_token",
    "invalid_priority",
    "invalid_sound",
    "pushover_feature_unsupported",
    "invalid_repeat",
    "invalid_expire",
    "too_many_urgent",
    "phone_app_outdated",
    "invalid_callback_url",
    "callback_url_not_allowed",
    "invalid_timestamp",
    "invalid_body",
    "priority_capped",
    "payload_too_large",
    "unsupported_content_type",
    "rate_limit_exceeded",
    "invalid_message",
    "message_too_long",
    # The fields passed on to /v1/send are checked as there.
    "invalid_title",
    "invalid_url",
    "invalid_url_title",
    "invalid_ttl",
    "invalid_device",
    "no_matching_device",
    "invalid_attachment",
    "attachment_too_large",
    "storage_quota_exceeded",
    "body_too_large",
    "no_phone_device",
)

ENDPOINTS = [
    Endpoint(
        "POST",
        "/v1/messages.json",
        post_message,
        "Pushover-compatible send (token in the body or query)",
        auth=None,
        body_doc=MessageRequest,
        response=ShimOk,
        errors=SHIM_ERRORS,
        error_doc=ShimError,
        tag="pushover",
        description="Failures: {status: 0, errors: [code], request} with the status /v1/send would give.",
    ),
    Endpoint(
        "GET",
        "/v1/sounds.json",
        list_sounds,
        "Pushover-compatible sound list",
        auth=None,
        response=ShimOk,
        errors=("invalid_token", "rate_limit_exceeded"),
        error_doc=ShimError,
        tag="pushover",
        extra={"query": [{"name": "token", "in": "query", "required": True, "schema": {"type": "string"}}]},
    ),
    Endpoint(
        "POST",
        "/v1/users/validate.json",
        validate_user,
        "Pushover-compatible user validation",
        auth=None,
        body_doc=ValidateRequest,
        response=ShimOk,
        errors=("invalid_token", "rate_limit_exceeded"),
        error_doc=ShimError,
        tag="pushover",
    ),
]
